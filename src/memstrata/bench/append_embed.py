"""``memstrata bench append-embed``: what ``MEMSTRATA_RECALL_EMBED=inline`` costs an
append, and what it leaves a bulk ingest, against the default mode, in one run.

Per mode (``search``, the default, and ``inline``), alternately, ``rounds`` times, each
in a fresh store with the default embedder and no worker thread:

- *single appends*: ``singles`` messages (after 20 warm-up ones) of generated English
  (30-60 words, user and assistant in turns) appended one at a time, each timed alone.
  Timed as a chat's appends, seconds apart (the burst test is off: every inline append
  embeds its message); afterwards ``pending`` says how many are not searchable by
  meaning without a read's catch-up (0 with inline embedding);
- *bulk ingest*: ``size`` such messages appended in a loop, then ``mem.recall.flush``
  (embedding is part of ingesting, as in ``bench locomo``); turns per second over both.
  With inline embedding the loop is a burst: its appends leave embedding to the
  batched path.
"""

from __future__ import annotations

import random
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from memstrata.api import Memory
from memstrata.backends.registry import redact
from memstrata.bench.history import TextGenerator
from memstrata.bench.report import envelope, machine_line, ms, percentile, print_table
from memstrata.config import Settings
from memstrata.errors import InvalidInput
from memstrata.ids import new_id
from memstrata.types import Scope

__all__ = ["DEFAULT_SIZES", "print_result", "run"]

DEFAULT_SIZES = (2_000,)
SINGLES = 200
WARMUP = 20
ROUNDS = 2
SEED = 1729
MODES = ("search", "inline")
TARGET_INLINE_P50_MS = 8.0


def _singles(mem: Memory, scope: Scope, texts: Sequence[str], warmup: int) -> list[int]:
    conv = mem.conversations.create(scope, title="append-embed singles")
    times: list[int] = []
    for i, text in enumerate(texts):
        role = "user" if i % 2 == 0 else "assistant"
        t0 = time.perf_counter_ns()
        mem.messages.append(scope, conv.id, role=role, content=text)
        if i >= warmup:
            times.append(time.perf_counter_ns() - t0)
    return times


def _bulk(mem: Memory, scope: Scope, texts: Sequence[str]) -> tuple[float, int]:
    conv = mem.conversations.create(scope, title="append-embed bulk")
    t0 = time.perf_counter()
    for i, text in enumerate(texts):
        role = "user" if i % 2 == 0 else "assistant"
        mem.messages.append(scope, conv.id, role=role, content=text)
    waiting = mem.recall.pending(scope)
    mem.recall.flush(scope)  # embedding is part of ingesting
    return time.perf_counter() - t0, waiting


def _one(
    mode: str,
    size: int,
    singles: int,
    warmup: int,
    *,
    url: str,
    scope: Scope,
    seed: int,
    shared_db: bool,
) -> dict[str, Any]:
    rng = random.Random(f"{seed}:{size}")
    gen = TextGenerator(rng)
    texts = [gen.message() for _ in range(warmup + singles + size)]
    single_scope = Scope(scope.tenant, f"{scope.user}-singles")
    # The singles are timed as a chat's appends, seconds apart: no gap counts as a burst.
    chat = Settings(worker="off", recall_embed=mode, recall_embed_inline_burst_ms=0)
    mem = Memory.open(url, settings=chat)
    try:
        if mem.recall.embedder is None:
            raise InvalidInput("bench append-embed needs an embedder (MEMSTRATA_EMBEDDER)")
        times = _singles(mem, single_scope, texts[: warmup + singles], warmup)
        pending = mem.recall.pending(single_scope)
    finally:
        mem.close()
    # The bulk ingest with the default burst gap, as a user's import runs.
    mem = Memory.open(url, settings=Settings(worker="off", recall_embed=mode))
    try:
        wall, waiting = _bulk(mem, scope, texts[warmup + singles :])
        embedder = mem.recall.embedder
        assert embedder is not None
        if shared_db:  # leave someone else's database as we found it
            mem.users.delete(single_scope)
            mem.users.delete(scope)
    finally:
        mem.close()
    return {
        "mode": mode,
        "singles": singles,
        "append_p50_ms": ms(percentile(times, 50)),
        "append_p95_ms": ms(percentile(times, 95)),
        "pending_after_singles": pending,
        "bulk_messages": size,
        "bulk_waiting_after_appends": waiting,
        "bulk_turns_per_s": round(size / wall, 1),
        "embedder": embedder.identity,
    }


def run(
    *,
    db: str | None = None,
    sizes: Sequence[int] | None = None,
    singles: int = SINGLES,
    warmup: int = WARMUP,
    rounds: int = ROUNDS,
    seed: int = SEED,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    chosen = sorted(set(sizes or DEFAULT_SIZES))
    if not chosen or min(chosen) < 10 or singles < 1 or warmup < 0 or rounds < 1:
        raise InvalidInput("sizes must be >= 10, singles and rounds >= 1", field="sizes")
    run_id = new_id()
    rows: list[dict[str, Any]] = []
    for size in chosen:
        for r in range(rounds):
            for mode in MODES:
                progress(f"append-embed: {mode}, {size:,} messages, round {r + 1}")
                scope = Scope(f"bench-{run_id}", f"append-{size}-{r}-{mode}")
                if db is None:
                    with tempfile.TemporaryDirectory(prefix="memstrata-bench-") as tmp:
                        url = f"sqlite:///{(Path(tmp) / 'append.db').as_posix()}"
                        row = _one(
                            mode,
                            size,
                            singles,
                            warmup,
                            url=url,
                            scope=scope,
                            seed=seed,
                            shared_db=False,
                        )
                else:
                    row = _one(
                        mode,
                        size,
                        singles,
                        warmup,
                        url=db,
                        scope=scope,
                        seed=seed,
                        shared_db=True,
                    )
                rows.append({"round": r + 1, **row})
    inline = [r for r in rows if r["mode"] == "inline"]
    search = [r for r in rows if r["mode"] == "search"]
    headline = {
        "inline_append_p50_ms": _median([r["append_p50_ms"] for r in inline]),
        "search_append_p50_ms": _median([r["append_p50_ms"] for r in search]),
        "inline_bulk_turns_per_s": _median([r["bulk_turns_per_s"] for r in inline]),
        "search_bulk_turns_per_s": _median([r["bulk_turns_per_s"] for r in search]),
        "meets_inline_p50_target": _median([r["append_p50_ms"] for r in inline])
        <= TARGET_INLINE_P50_MS,
    }
    params = {
        "sizes": chosen,
        "singles": singles,
        "warmup": warmup,
        "rounds": rounds,
        "seed": seed,
        "modes": list(MODES),
        "db": "sqlite (a temporary file per mode and round)" if db is None else redact(db),
        "singles_timing": "each append timed alone, none part of a burst (a chat's appends)",
        "bulk": "appends in a loop, then mem.recall.flush; turns/s over both",
        "targets": {"inline_append_p50_ms": TARGET_INLINE_P50_MS},
    }
    return envelope("append-embed", params=params, headline=headline, rows=rows)


def _median(values: Sequence[float]) -> float:
    ordered = sorted(values)
    mid = len(ordered) // 2
    return ordered[mid] if len(ordered) % 2 else round((ordered[mid - 1] + ordered[mid]) / 2, 3)


_COLUMNS = (
    ("round", "round"),
    ("mode", "MEMSTRATA_\nRECALL_EMBED"),
    ("append_p50_ms", "append\np50 ms"),
    ("append_p95_ms", "append\np95 ms"),
    ("pending_after_singles", "pending after\nsingles"),
    ("bulk_messages", "bulk\nmessages"),
    ("bulk_waiting_after_appends", "bulk waiting\nafter appends"),
    ("bulk_turns_per_s", "bulk ingest\nturns/s"),
)


def print_result(result: dict[str, Any], console: Console | None = None) -> None:
    out = console or Console()
    print_table(
        "memstrata bench append-embed (single appends and bulk ingest, per embedding mode)",
        _COLUMNS,
        result["rows"],
        notes=[machine_line(result["machine"])],
        console=out,
    )
