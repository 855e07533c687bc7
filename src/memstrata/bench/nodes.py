"""``memstrata bench nodes``: node memory add+flush and history at 10 to 10,000 turns.

memstrata's rows also time one deletion of a conversation message whose node turn sits
in the oldest object (the turn is erased before the deletion answers, its receipt
verified), and history again after it; then the same deletion in a node memory of as
many turns compacted as it grew (one chunk per prefill batch), whose erasure reads every
chunk but rewrites one.

Beside memstrata's layout (one write-once segment per flush, compaction into
chunks) runs the design it replaces: one JSON object per node, loaded and
rewritten whole on every flush (Dify's NodeTokenBufferMemory), on the same store
with the same serializer, in the same run. Stores: local files, and S3 when
moto can be started here (a local S3-compatible server, its own process).
"""

from __future__ import annotations

import contextlib
import random
import socket
import subprocess
import sys
import tempfile
import time
import urllib.request
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from rich.console import Console

from memstrata.api._sync import Memory
from memstrata.api._sync_nodes import NodeMemory
from memstrata.bench.report import envelope, percentile, print_table
from memstrata.blobs import Blob, BlobOp, Blobs, Get, Put
from memstrata.config import Settings
from memstrata.conversation.history import HistoryPlanner
from memstrata.nodes.layout import Turn, decode_turns, encode
from memstrata.nodes.service import blobs_for
from memstrata.nodes.thread import SEEK, ThreadWalker
from memstrata.types import Scope

__all__ = ["print_result", "run"]

DEFAULT_SIZES = [10, 1_000, 10_000]
REPEATS = 30
PREFILL_BATCH = 32
SCOPE = Scope("bench", "bench")
_WORDS = [
    *[
        "memory",
        "node",
        "workflow",
        "answer",
        "question",
        "model",
        "context",
        "token",
        "budget",
        "branch",
        "thread",
    ],
    *[
        "store",
        "object",
        "segment",
        "chunk",
        "write",
        "read",
        "flush",
        "turn",
        "user",
        "assistant",
        "file",
        "image",
    ],
]


def _text(rng: random.Random) -> str:
    return " ".join(rng.choice(_WORDS) for _ in range(rng.randint(30, 60)))


@contextlib.contextmanager
def _moto() -> Iterator[str | None]:
    """An S3 endpoint from a moto server of our own, or None when moto is missing."""
    try:
        import flask  # noqa: F401
        import moto.server  # noqa: F401
    except ImportError:
        yield None
        return
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        port = int(s.getsockname()[1])
    proc = subprocess.Popen(
        [sys.executable, "-m", "moto.server", "-H", "127.0.0.1", "-p", str(port)],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.DEVNULL,
    )
    try:
        deadline = time.monotonic() + 30
        while True:
            try:
                socket.create_connection(("127.0.0.1", port), 0.2).close()
                break
            except OSError:
                if proc.poll() is not None or time.monotonic() > deadline:
                    yield None
                    return
                time.sleep(0.05)
        endpoint = f"http://127.0.0.1:{port}"
        req = urllib.request.Request(f"{endpoint}/bench", method="PUT")
        urllib.request.urlopen(req, timeout=10).close()
        yield endpoint
    finally:
        proc.terminate()
        proc.wait(10)


def _timed(fn: Callable[[], Any], blobs: Blobs, repeats: int) -> dict[str, float]:
    times: list[float] = []
    r0, read0, wrote0 = blobs.counters()
    for _ in range(repeats):
        start = time.perf_counter()
        fn()
        times.append((time.perf_counter() - start) * 1000)
    r1, read1, wrote1 = blobs.counters()
    return {
        "p50_ms": percentile(times, 50),
        "p95_ms": percentile(times, 95),
        "requests": (r1 - r0) / repeats,
        "bytes_read": (read1 - read0) / repeats,
        "bytes_written": (wrote1 - wrote0) / repeats,
    }


class _Chain:
    """Turns of one linear thread with fresh message ids."""

    def __init__(self, seed: int) -> None:
        self.rng = random.Random(seed)
        self.n = 0
        self.last: str | None = None

    def next(self) -> dict[str, Any]:
        mid = f"m{self.n}"
        turn = {
            "message_id": mid,
            "parent_message_id": self.last,
            "user_content": _text(self.rng),
            "assistant_content": _text(self.rng),
        }
        self.n += 1
        self.last = mid
        return turn


def _prefilled(
    mem: Memory, size: int, *, compact_each: bool
) -> tuple[str, NodeMemory, str, _Chain]:
    """A node memory of ``size`` turns flushed in batches (compacted after each, or not),
    and its conversation's id; before them, the turn of a conversation message (its id
    returned), to be deleted: its turn is erased before the deletion answers."""
    cid = mem.conversations.create(SCOPE).id
    node: NodeMemory = mem.nodes.open(SCOPE, "bench-app", cid, "llm")
    victim = mem.messages.append(SCOPE, cid, role="user", content="a question to delete")
    node.add_turn(victim.id, None, user_content="its turn", assistant_content="its answer")
    chain = _Chain(size)
    for start in range(0, size, PREFILL_BATCH):
        for _ in range(min(PREFILL_BATCH, size - start)):
            node.add_turn(**chain.next())
        node.flush()
        if compact_each:
            node.compact()
    return cid, node, victim.id, chain


def _memstrata(mem: Memory, size: int, repeats: int) -> dict[str, Any]:
    cid, node, victim, chain = _prefilled(mem, size, compact_each=False)
    node.compact()
    blobs = blobs_for(mem.core)

    def add_flush() -> None:
        node.add_turn(**chain.next())
        node.flush()

    write = _timed(add_flush, blobs, repeats)
    mem.jobs.run_pending()  # the compaction the background worker would have run
    objects: list[int] = []

    def history() -> None:
        objects.append(node.history(chain.last, max_tokens=2000).objects_read)

    hist = _timed(history, blobs, repeats)
    erase_ms = _delete_timed(mem, cid, victim)
    after = _timed(history, blobs, repeats)
    return {
        **_row("memstrata", size, write, hist, sum(objects) / len(objects)),
        "message_delete_ms": round(erase_ms, 3),
        "history_after_delete_p50_ms": after["p50_ms"],
        "message_delete_chunked_ms": round(_chunked_delete(mem, size), 3),
    }


def _delete_timed(mem: Memory, cid: str, message_id: str) -> float:
    """Milliseconds to delete a message whose node turns are erased before it answers."""
    t0 = time.perf_counter()
    receipt = mem.messages.delete(SCOPE, cid, message_id)
    erase_ms = (time.perf_counter() - t0) * 1000
    if receipt.verified is not True:
        raise RuntimeError(f"the deletion's receipt did not verify: {receipt.findings}")
    return erase_ms


def _chunked_delete(mem: Memory, size: int) -> float:
    """A deletion's time in a node memory of as many turns compacted as it grew, one chunk
    per prefill batch (a live one is compacted every few flushes), the turn in the oldest."""
    cid, _, victim, _ = _prefilled(mem, size, compact_each=True)
    return _delete_timed(mem, cid, victim)


def _whole_json(blobs: Blobs, key: str, size: int, repeats: int, mem: Memory) -> dict[str, Any]:
    """Dify's layout: the node's whole history in one object, rewritten per flush."""
    chain = _Chain(size)
    rt = mem.admin.runtime
    turns = [
        Turn(rt.make_id(), t["message_id"], t["parent_message_id"], t["user_content"], (),
             t["assistant_content"], (), rt.clock())
        for t in (chain.next() for _ in range(size))
    ]  # fmt: skip
    blobs.run(_put_all(key, turns))

    def add_flush() -> None:
        stored = blobs.run(_get_all(key))
        t = chain.next()
        stored.append(
            Turn(rt.make_id(), t["message_id"], t["parent_message_id"], t["user_content"], (),
                 t["assistant_content"], (), rt.clock())
        )  # fmt: skip
        blobs.run(_put_all(key, stored))

    write = _timed(add_flush, blobs, repeats)

    def history() -> None:
        stored = blobs.run(_get_all(key))
        planner = HistoryPlanner(
            system=[], max_tokens=2000, max_messages=500, count=lambda m: m.token_count
        )
        walker = ThreadWalker(
            conversation_id="c",
            current_message_id=chain.last,
            parent_message_id=SEEK,
            planner=planner,
            tokenizer=rt.tokenizer,
        )
        walker.feed(stored[::-1])

    hist = _timed(history, blobs, repeats)
    return _row("whole-json rewrite", size, write, hist, 1.0)


def _put_all(key: str, turns: list[Turn]) -> BlobOp[None]:
    yield Put(key, encode("segment", {"turns": [t.to_json() for t in turns]}))


def _get_all(key: str) -> BlobOp[list[Turn]]:
    blob: Blob = yield Get(key)
    return decode_turns(blob.data, key, "segment")


def _row(
    system: str, size: int, write: dict[str, float], hist: dict[str, float], objects: float
) -> dict[str, Any]:
    return {
        "system": system,
        "turns": size,
        "add_flush_p50_ms": write["p50_ms"],
        "add_flush_p95_ms": write["p95_ms"],
        "add_flush_bytes_written": write["bytes_written"],
        "add_flush_bytes_read": write["bytes_read"],
        "history_p50_ms": hist["p50_ms"],
        "history_p95_ms": hist["p95_ms"],
        "history_bytes_read": hist["bytes_read"],
        "history_objects": objects,
    }


def run(
    *,
    db: str | None = None,
    sizes: list[int] | None = None,
    progress: Callable[[str], None] = lambda _: None,
    repeats: int | None = None,
    stores: tuple[str, ...] = ("file", "s3"),
) -> dict[str, Any]:
    sizes = sizes or DEFAULT_SIZES
    repeats = repeats or REPEATS
    rows: list[dict[str, Any]] = []
    notes: list[str] = []
    with tempfile.TemporaryDirectory(prefix="memstrata-bench-nodes-") as tmp, _moto() as s3:
        for store in stores:
            if store == "s3" and s3 is None:
                notes.append("s3: skipped, needs an S3 server (moto): pip install 'moto[s3]' flask")
                continue
            for size in sizes:
                progress(f"{store}: {size:,} turns")
                home = Path(tmp) / f"{store}-{size}"
                settings = Settings(home=home, worker="off")
                url = f"file://{(home / 'blobs').as_posix()}"
                if store == "s3":
                    assert s3 is not None
                    settings = settings.model_copy(
                        update={
                            "s3_endpoint": s3,
                            "s3_access_key_id": "bench",
                            "s3_secret_access_key": "bench",
                        }
                    )
                    url = f"s3://bench/{store}-{size}"
                database = db or f"sqlite:///{(home / 'bench.db').as_posix()}"
                mem = Memory.open(database, blobs=url, settings=settings)
                try:
                    for row in (
                        _memstrata(mem, size, repeats),
                        _whole_json(
                            blobs_for(mem.core), "baseline/node.json.gz", size, repeats, mem
                        ),
                    ):
                        rows.append({"store": store, **row})
                finally:
                    mem.close()
    headline: dict[str, Any] = {}
    for store in stores:
        mine = {r["turns"]: r for r in rows if r["store"] == store and r["system"] == "memstrata"}
        if len(mine) > 1:
            lo, hi = mine[min(mine)], mine[max(mine)]
            headline[f"{store}_add_flush_ratio_{max(mine)}_vs_{min(mine)}"] = (
                hi["add_flush_p50_ms"] / lo["add_flush_p50_ms"]
            )
            headline[f"{store}_add_flush_p50_ms_{max(mine)}"] = hi["add_flush_p50_ms"]
            headline[f"{store}_history_p50_ms_{max(mine)}"] = hi["history_p50_ms"]
    baselines = {
        "whole-json rewrite": [r for r in rows if r["system"] != "memstrata"],
    }
    return envelope(
        "nodes",
        params={"sizes": sizes, "repeats": repeats, "prefill_batch": PREFILL_BATCH, "notes": notes},
        headline=headline,
        rows=[r for r in rows if r["system"] == "memstrata"],
        baselines=baselines,
    )


def print_result(result: dict[str, Any], console: Console) -> None:
    rows = sorted(
        [*result["rows"], *result["baselines"].get("whole-json rewrite", [])],
        key=lambda r: (r["store"], r["turns"], r["system"]),
    )
    print_table(
        "node memory: add+flush and history (max_tokens=2000), per call",
        [
            ("store", "store"),
            ("turns", "turns"),
            ("system", "layout"),
            ("add_flush_p50_ms", "add+flush p50 ms"),
            ("add_flush_p95_ms", "p95 ms"),
            ("add_flush_bytes_written", "written B"),
            ("add_flush_bytes_read", "read B"),
            ("history_p50_ms", "history p50 ms"),
            ("history_p95_ms", "p95 ms"),
            ("history_bytes_read", "read B"),
            ("history_objects", "objects"),
            ("message_delete_ms", "delete ms"),
            ("history_after_delete_p50_ms", "history after p50 ms"),
            ("message_delete_chunked_ms", "delete, chunked ms"),
        ],
        rows,
        notes=[
            *result["params"].get("notes", []),
            *(f"{k}: {v:.3g}" for k, v in result["headline"].items()),
        ],
        console=console,
    )
