"""CPU instructions of one append with the keyword index on SQLite, counted by valgrind.

``python scripts/append_instructions.py [--appends 2000]`` runs the same process twice
under ``valgrind --tool=cachegrind`` (see ``scripts/context_instructions.py``), each in
a fresh store: once with 20 warm-up appends and once with ``--appends`` more, of
generated English (30-60 words, user and assistant in turns, a fixed seed). The
difference over ``--appends`` is what one append costs, the keyword flushes that every
128th append runs included (no embedding: no worker runs and nothing searches).
Run it from each of two trees to compare them on a machine whose speed drifts.

Needs valgrind (Debian: ``apt-get install valgrind``); about a minute a run.
"""

from __future__ import annotations

import argparse
import random
import tempfile
from pathlib import Path

from context_instructions import instructions

WARMUP = 20
SEED = 7


def appends(directory: Path, n: int) -> None:
    from memstrata.api import Memory
    from memstrata.bench.history import TextGenerator
    from memstrata.config import Settings
    from memstrata.types import Scope

    gen = TextGenerator(random.Random(SEED))
    texts = [gen.message() for _ in range(WARMUP + n)]
    mem = Memory.open(
        f"sqlite:///{directory / 'a.db'}", settings=Settings(home=directory, worker="off")
    )
    try:
        scope = Scope("bench", "user")
        cid = mem.conversations.create(scope, title="append instructions").id
        for i, text in enumerate(texts):
            role = "user" if i % 2 == 0 else "assistant"
            mem.messages.append(scope, cid, role=role, content=text)
    finally:
        mem.close()


def counted(n: int) -> int:
    with tempfile.TemporaryDirectory() as tmp:
        return instructions([__file__, "--run", str(n), "--db", tmp])


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--appends", type=int, default=2000)
    parser.add_argument("--run", type=int, help=argparse.SUPPRESS)  # the measured process
    parser.add_argument("--db", type=Path, help=argparse.SUPPRESS)
    args = parser.parse_args(argv)
    if args.run is not None:
        appends(args.db, args.run)
        return
    if args.appends < 1:
        parser.error("--appends must be >= 1")
    per_append = (counted(args.appends) - counted(0)) / args.appends
    print(f"{per_append / 1e3:.1f} k instructions per append ({args.appends:,} appends)")


if __name__ == "__main__":
    main()
