"""``memstrata bench context``: context assembly latency on branched trees (LLM excluded).

For each size a branched conversation is built (the history benchmark's tree:
regenerations and edits), working memory and a plan are stored, and the active
branch is compacted once with the offline summarizer, so calls exercise every
built-in tier and the summary's ancestry check. Every message is then embedded
with the default embedder (steady state: nothing waiting to embed), and
``mem.context`` is called on leaves picked uniformly at random, with no result
cache; only those calls are timed. They include what a user pays for semantic
recall: the query (the newest user message on the branch) reuses its stored
vector, and the vector search runs over every message of the user.
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
from memstrata.bench.history import TextGenerator, all_leaves, build_tree
from memstrata.bench.report import envelope, machine_line, ms, percentile, print_table
from memstrata.config import Settings
from memstrata.errors import InvalidInput
from memstrata.ids import new_id
from memstrata.types import Scope

__all__ = ["DEFAULT_SIZES", "print_result", "run"]

DEFAULT_SIZES = (1_000, 100_000)
CALLS = 300
WARMUP = 30
BUDGET = 8000
SEED = 1729
TARGET_P95_MS = 30.0


def _one_size(
    size: int,
    *,
    url: str,
    scope: Scope,
    calls: int,
    warmup: int,
    budget: int,
    seed: int,
    progress: Callable[[str], None],
) -> dict[str, Any]:
    rng = random.Random(f"{seed}:{size}")
    gen = TextGenerator(rng)
    texts = [gen.message() for _ in range(size)]
    # No worker thread: background jobs would compete with the timed calls.
    mem = Memory.open(url, settings=Settings(worker="off"))
    try:
        mem.compaction.kit.auto_compact = False
        conv = mem.conversations.create(scope, title=f"context bench {size}")
        progress(f"context: appending {size:,} messages")
        build_tree(mem, scope, conv.id, size, texts, rng)
        mem.working.put(scope, "# User\n- name: bench\n- prefers concise answers")
        mem.plans.put(scope, conv.id, {"steps": ["read", "answer", "check"]})
        compacted = mem.compact(scope, conv.id).outcome
        embedder = mem.recall.embedder
        if embedder is not None:
            progress(f"context: embedding {size:,} messages")
            mem.recall.flush(scope)
        leaves = all_leaves(mem, scope, conv.id)
        progress(f"context: {warmup + calls} calls on {len(leaves):,} leaves")
        pick = random.Random(f"{seed}:{size}:leaves")
        times: list[int] = []
        totals: list[int] = []
        with_summary = 0
        for i in range(warmup + calls):
            leaf = pick.choice(leaves)
            t0 = time.perf_counter_ns()
            ctx = mem.context(scope, conv.id, leaf_id=leaf.id, budget=budget)
            elapsed = time.perf_counter_ns() - t0
            if ctx.report.leaf_id != leaf.id:
                raise RuntimeError(f"context of leaf {leaf.id} names another leaf")
            if i < warmup:
                continue
            times.append(elapsed)
            totals.append(ctx.report.total)
            with_summary += ctx.report.summary_id is not None
        ancestry = _ancestry(mem, conv.id, leaves, calls, random.Random(f"{seed}:{size}:anc"))
    finally:
        mem.close()
    return {
        "size": size,
        "messages": size,
        "leaves": len(leaves),
        "compaction": compacted,
        "calls": calls,
        "context_p50_ms": ms(percentile(times, 50)),
        "context_p95_ms": ms(percentile(times, 95)),
        "context_p99_ms": ms(percentile(times, 99)),
        "tokens_avg": round(sum(totals) / len(totals), 1),
        "calls_with_summary": with_summary,
        "embedder": None if embedder is None else embedder.identity,
        **ancestry,
    }


def _ancestry(
    mem: Memory, cid: str, leaves: Sequence[Any], calls: int, rng: random.Random
) -> dict[str, Any]:
    """The branch filter's own cost, as the recall tier pays it: read the leaf's chains
    (one query) and judge 100 labelled candidates against them."""
    from memstrata.conversation.branches import branch_of, labels_of

    sample = [m.id for m in rng.sample(list(leaves), min(100, len(leaves)))]
    labels = list(mem.admin.read(labels_of, cid, sample).values())
    times: list[int] = []
    chains: list[int] = []
    on_branch = 0
    for _ in range(calls):
        leaf = rng.choice(leaves).id
        t0 = time.perf_counter_ns()
        branch = mem.admin.read(branch_of, cid, leaf)
        assert branch is not None
        kept = sum(branch.contains(chain, depth) for chain, depth in labels)
        times.append(time.perf_counter_ns() - t0)
        chains.append(len(branch.exits))
        on_branch += kept
    return {
        "ancestry_p50_ms": ms(percentile(times, 50)),
        "ancestry_p95_ms": ms(percentile(times, 95)),
        "chains_per_branch_avg": round(sum(chains) / len(chains), 1),
        "candidates_on_branch_avg": round(on_branch / calls, 2),
    }


def run(
    *,
    db: str | None = None,
    sizes: Sequence[int] | None = None,
    calls: int = CALLS,
    warmup: int = WARMUP,
    budget: int = BUDGET,
    seed: int = SEED,
    progress: Callable[[str], None] = lambda _: None,
) -> dict[str, Any]:
    chosen = sorted(set(sizes or DEFAULT_SIZES))
    if not chosen or min(chosen) < 10 or calls < 1 or warmup < 0:
        raise InvalidInput("sizes must be >= 10, calls >= 1, warmup >= 0", field="sizes")
    run_id = new_id()
    rows: list[dict[str, Any]] = []
    for size in chosen:
        common: dict[str, Any] = {
            "calls": calls,
            "warmup": warmup,
            "budget": budget,
            "seed": seed,
            "progress": progress,
        }
        if db is None:
            with tempfile.TemporaryDirectory(prefix="memstrata-bench-") as tmp:
                url = f"sqlite:///{(Path(tmp) / 'context.db').as_posix()}"
                rows.append(_one_size(size, url=url, scope=Scope("bench", "context"), **common))
        else:
            scope = Scope(f"bench-{run_id}", f"context-{size}")
            rows.append(_one_size(size, url=db, scope=scope, **common))
    largest = max(rows, key=lambda r: r["size"])
    on_sqlite = db is None or db.startswith("sqlite")
    headline = {
        "context_p50_ms": {str(r["size"]): r["context_p50_ms"] for r in rows},
        "context_p95_ms": {str(r["size"]): r["context_p95_ms"] for r in rows},
        "meets_p95_target_at_largest": (
            largest["context_p95_ms"] <= TARGET_P95_MS if on_sqlite else None
        ),
    }
    params = {
        "sizes": chosen,
        "calls": calls,
        "warmup": warmup,
        "budget": budget,
        "seed": seed,
        "db": "sqlite (a temporary file per size)" if db is None else redact(db),
        "leaf_choice": "uniform over all leaves",
        "result_cache": False,
        "llm": "excluded (one offline compaction before timing)",
        "tiers": "system, recent window, summary, working memory, plan, recall (keywords and "
        "vectors of the default embedder; relevance gate and branch filter on)",
        "embedding": "every message embedded before timing (steady state); the query is the "
        "newest user message on the branch, whose stored vector is reused (keywords only when "
        "no embedder is installed: the row's embedder is then null)",
        "ancestry": "branch_of(leaf) (one query over its chains) + 100 labelled candidates "
        "judged, per call; also inside every context call's recall tier",
        "targets": {"context_p95_ms_at_100k_sqlite": TARGET_P95_MS},
    }
    return envelope("context", params=params, headline=headline, rows=rows)


_COLUMNS = (
    ("messages", "messages"),
    ("leaves", "leaves"),
    ("context_p50_ms", "p50\nms"),
    ("context_p95_ms", "p95\nms"),
    ("context_p99_ms", "p99\nms"),
    ("tokens_avg", "tokens\navg"),
    ("calls_with_summary", "calls with\nsummary"),
    ("ancestry_p95_ms", "ancestry\np95 ms"),
    ("chains_per_branch_avg", "chains per\nbranch"),
)


def print_result(result: dict[str, Any], console: Console | None = None) -> None:
    out = console or Console()
    print_table(
        f"memstrata bench context (budget {result['params']['budget']} tokens)",
        _COLUMNS,
        result["rows"],
        notes=[machine_line(result["machine"])],
        console=out,
    )
