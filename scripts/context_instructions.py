"""CPU instructions of one ``mem.context`` call, counted by valgrind (noise-free).

``python scripts/context_instructions.py [--size 1000] [--calls 40] [--neighbours 0]``
builds the store ``memstrata bench context`` builds (a branched conversation of
``--size`` messages, working memory, a plan, one compaction, every message embedded;
with ``--neighbours N``, N other users of the same store with a conversation of
``--size`` messages each, which the counted calls never read), then runs the same
process twice under ``valgrind --tool=cachegrind``: once with 10 warm-up context calls
and once with ``--calls`` more, each on a leaf picked with a fixed seed. The difference
over ``--calls`` is the instructions one call costs. Wall-clock rounds on a shared
machine drift by up to two times; an instruction count of the same calls on the same
store does not, so two trees can be compared with it one after the other (run the
script from each, with ``--db`` naming one store for both).

Needs valgrind (Debian: ``apt-get install valgrind``); about two minutes a run.
"""

from __future__ import annotations

import argparse
import os
import random
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

WARMUP = 10
SEED = 1729
BUDGET = 8000


def build(directory: Path, size: int, neighbours: int = 0) -> None:
    from memstrata.api import Memory
    from memstrata.bench.history import TextGenerator, build_tree
    from memstrata.config import Settings
    from memstrata.types import Scope

    rng = random.Random(f"{SEED}:{size}")
    gen = TextGenerator(rng)
    texts = [gen.message() for _ in range(size)]
    scope = Scope("bench", "user")
    mem = Memory.open(f"sqlite:///{directory / 'm.db'}", settings=Settings(worker="off"))
    try:
        mem.compaction.kit.auto_compact = False
        conv = mem.conversations.create(scope, title="context instructions")
        build_tree(mem, scope, conv.id, size, texts, rng)
        mem.working.put(scope, "# User\n- name: bench\n- prefers concise answers")
        mem.plans.put(scope, conv.id, {"steps": ["read", "answer", "check"]})
        mem.compact(scope, conv.id)
        mem.recall.flush(scope)
        for i in range(neighbours):
            other = Scope("bench", f"neighbour-{i}")
            cid = mem.conversations.create(other, title="a neighbour").id
            for n in range(size):
                role = "user" if n % 2 == 0 else "assistant"
                mem.messages.append(other, cid, role=role, content=gen.message())
            mem.recall.flush(other)
        (directory / "conversation").write_text(conv.id)
    finally:
        mem.close()


def calls(directory: Path, n: int) -> None:
    from memstrata.api import Memory
    from memstrata.bench.history import all_leaves
    from memstrata.config import Settings
    from memstrata.types import Scope

    scope = Scope("bench", "user")
    cid = (directory / "conversation").read_text()
    mem = Memory.open(f"sqlite:///{directory / 'm.db'}", settings=Settings(worker="off"))
    try:
        mem.compaction.kit.auto_compact = False
        leaves = all_leaves(mem, scope, cid)
        pick = random.Random(f"{SEED}:leaves")
        for leaf in [pick.choice(leaves) for _ in range(WARMUP + n)]:
            mem.context(scope, cid, leaf_id=leaf.id, budget=BUDGET)
    finally:
        mem.close()


def counted(directory: Path, n: int) -> int:
    # On a copy: a context call writes (its prefix fingerprint), and each count starts
    # from the store as built.
    with tempfile.TemporaryDirectory() as tmp:
        copy = Path(tmp) / "store"
        shutil.copytree(directory, copy)
        return _valgrind(copy, n)


def _valgrind(directory: Path, n: int) -> int:
    return instructions([__file__, "--db", str(directory), "--run", str(n)])


def instructions(argv: list[str]) -> int:
    """The CPU instructions of ``python argv...`` (a fixed hash seed), counted by valgrind."""
    out = subprocess.run(
        [
            "valgrind",
            "--tool=cachegrind",
            "--cache-sim=no",
            "--cachegrind-out-file=/dev/null",
            sys.executable,
            *argv,
        ],
        capture_output=True,
        text=True,
        check=True,
        env={**os.environ, "PYTHONHASHSEED": "0"},
    )
    found = re.search(r"I\s+refs:\s+([\d,]+)", out.stderr)
    if found is None:
        raise SystemExit(f"valgrind printed no instruction count:\n{out.stderr[-2000:]}")
    return int(found.group(1).replace(",", ""))


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--size", type=int, default=1000)
    parser.add_argument("--calls", type=int, default=40)
    parser.add_argument("--neighbours", type=int, default=0, help="other users in the store")
    parser.add_argument("--db", type=Path, help="a store built before (kept when given)")
    parser.add_argument("--run", type=int, help=argparse.SUPPRESS)  # the measured process
    args = parser.parse_args()
    if args.run is not None:
        calls(args.db, args.run)
        return
    if args.calls < 1 or args.size < 10 or args.neighbours < 0:
        parser.error("--calls must be >= 1, --size >= 10 and --neighbours >= 0")
    with tempfile.TemporaryDirectory() as tmp:
        directory = args.db or Path(tmp)
        if not (directory / "conversation").exists():
            directory.mkdir(parents=True, exist_ok=True)
            build(directory, args.size, args.neighbours)
        base, more = counted(directory, 0), counted(directory, args.calls)
    per_call = (more - base) / args.calls
    others = f", {args.neighbours} other users alike" if args.neighbours else ""
    print(f"{per_call / 1e6:.2f} M instructions per context call ({args.size:,} messages{others})")


if __name__ == "__main__":
    main()
