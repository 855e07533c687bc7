"""One measurement of ``memstrata bench peers`` in its own process.

``python -m memstrata.bench.peers.worker '<json spec>'`` prints one JSON object per
line on stdout as results come in (so a process stopped at its deadline still
leaves what it measured) and progress on stderr. A peer that is not installed is
reported as ``unavailable``, never skipped silently.

Specs: ``{"task": "chat", "system", "sizes", "calls", "time_limit_s", "max_tokens",
"seed"}``, ``{"task": "branched", ...same}``, ``{"task": "recall", "system", "data",
"limit_conversations"}``.
"""

from __future__ import annotations

import json
import os
import random
import sys
import tempfile
import time
from collections.abc import Callable, Sequence
from pathlib import Path
from typing import Any

# Set before any peer is imported: no telemetry, no model hub, no tracing (offline always).
OFFLINE_ENV = {
    "MEM0_TELEMETRY": "False",
    "ANONYMIZED_TELEMETRY": "False",
    "HF_HUB_OFFLINE": "1",
    "TRANSFORMERS_OFFLINE": "1",
    "LANGCHAIN_TRACING_V2": "false",
    "LANGSMITH_TRACING": "false",
    "TOKENIZERS_PARALLELISM": "false",
}


def _emit(record: dict[str, Any]) -> None:
    sys.stdout.write(json.dumps(record) + "\n")
    sys.stdout.flush()


def _progress(line: str) -> None:
    sys.stderr.write(line + "\n")
    sys.stderr.flush()


def texts_for(seed: int, count: int) -> list[str]:
    """The messages every system stores, identical across systems and runs."""
    from memstrata.bench.history import TextGenerator

    gen = TextGenerator(random.Random(f"{seed}:peers"))
    return [gen.message() for _ in range(count)]


def _chat(spec: dict[str, Any], home: Path) -> None:
    from memstrata.bench.peers.drive import drive
    from memstrata.bench.peers.systems import counters, open_system

    sizes: list[int] = spec["sizes"]
    texts = texts_for(spec["seed"], max(sizes))
    chat = open_system(spec["system"], home, spec["max_tokens"])
    try:
        drive(
            chat,
            texts,
            sizes,
            max_tokens=spec["max_tokens"],
            calls=spec["calls"],
            time_limit_s=spec["time_limit_s"],
            count=counters()[1],
            emit=_emit,
        )
    finally:
        chat.close()


class _RandomLeaves:
    """The branched tree as a chat memory whose history is that of the next leaf of a
    sequence drawn beforehand (so the draw stays outside the timed call)."""

    def __init__(self, mem: Any, scope: Any, cid: str, leaves: list[str]) -> None:
        self._read = mem.history
        self._scope, self._cid = scope, cid
        self._next = iter(leaves)

    def history(self, max_tokens: int) -> list[str]:
        leaf = next(self._next)
        h = self._read(self._scope, self._cid, leaf_id=leaf, max_tokens=max_tokens)
        return [m.content for m in h.messages]


def _branched(spec: dict[str, Any], home: Path) -> None:
    """memstrata on a branched tree of each size (regenerations and edits, as in ``bench
    history``), history on random leaves: the same record as the linear run."""
    from memstrata.api import Memory
    from memstrata.bench.history import all_leaves, build_tree
    from memstrata.bench.peers.drive import MIN_CALLS, WARMUP_CALLS, history_calls
    from memstrata.config import Settings
    from memstrata.types import Scope

    calls = max(spec["calls"], MIN_CALLS)
    texts = texts_for(spec["seed"], max(spec["sizes"]))
    scope = Scope("bench", "peers")
    for size in sorted(spec["sizes"]):
        settings = Settings(home=home, worker="off", recall_index=False)
        mem = Memory.open(
            f"sqlite:///{(home / f'branched-{size}.db').as_posix()}", settings=settings
        )
        try:
            cid = mem.conversations.create(scope, title=f"branched {size}").id
            built = build_tree(
                mem, scope, cid, size, texts, random.Random(f"{spec['seed']}:{size}")
            )
            leaves = [m.id for m in all_leaves(mem, scope, cid)]
            pick = random.Random(f"{spec['seed']}:{size}:leaves")
            drawn = [pick.choice(leaves) for _ in range(WARMUP_CALLS + calls)]
            reads = history_calls(
                _RandomLeaves(mem, scope, cid, drawn),
                spec["max_tokens"],
                calls,
                _count_message(),
                time.perf_counter_ns,
            )
        finally:
            mem.close()
        _emit(
            {
                "size": size,
                "status": "ok",
                "append_s": round(built.wall_ns / 1e9, 3),
                "append_per_s": round(built.messages / (built.wall_ns / 1e9), 1),
                "leaves": len(leaves),
                **reads,
            }
        )


def _count_message() -> Callable[[str], int]:
    from memstrata.bench.peers.systems import counters

    return counters()[1]


def _recall(spec: dict[str, Any], home: Path) -> None:
    from memstrata.bench.peers import recall

    run = {"memstrata": recall.run_memstrata, "mem0": recall.run_mem0}[spec["system"]]
    _emit({"status": "ok", **run(Path(spec["data"]), _progress, spec.get("limit_conversations"))})


TASKS: dict[str, Callable[[dict[str, Any], Path], None]] = {
    "chat": _chat,
    "branched": _branched,
    "recall": _recall,
}


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if len(args) != 1:
        _progress("usage: python -m memstrata.bench.peers.worker '<json spec>'")
        return 2
    spec = json.loads(args[0])
    os.environ.update(OFFLINE_ENV)
    with tempfile.TemporaryDirectory(prefix="memstrata-peers-") as tmp:
        try:
            TASKS[spec["task"]](spec, Path(tmp))
        except ImportError as exc:
            from memstrata.bench.peers.systems import PEER_EXTRA

            _emit({"status": "unavailable", "reason": f"{exc} ({PEER_EXTRA})"})
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
