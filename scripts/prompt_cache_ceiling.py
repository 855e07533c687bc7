"""How far the cache layout's mean cacheable share can go at one budget.

``python scripts/prompt_cache_ceiling.py --data ../shared/bench/locomo-dev.json
[--budget 2000]`` replays the chats of ``memstrata bench prompt-cache`` under the cache
layout for a grid of two settings and prints each cell's mean share, the share of turns
where the window stepped or a summary came in, and the mean prompt tokens:

- the low-water mark (what the window keeps of its share when it steps forward: the
  lower, the rarer the steps, and the less history in each prompt), and
- the per-turn room (the share of the budget the tiers that change every turn, such as
  recall, keep once a conversation is under way; 0 leaves them out altogether).

With no per-turn tier and a window that keeps almost nothing when it steps, what is left
is what no order of the same content can avoid: every turn adds the previous reply and a
new question after the stable part, a young conversation's prompt is short, and a step
changes everything after the messages that precede the oldest turn kept.
"""

from __future__ import annotations

import argparse
import sys
from collections.abc import Callable
from pathlib import Path

LOW_WATERS = (0.7, 0.3, 0.05)
ROOMS = (0.05, 0.0)


def _fraction(low: float, high: float, *, closed: bool) -> Callable[[str], float]:
    def parse(text: str) -> float:
        value = float(text)
        if not (low <= value < high if closed else low < value < high):
            raise argparse.ArgumentTypeError(f"{text} is outside its range")
        return value

    return parse


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument(
        "--data", type=Path, help="LoCoMo-format conversations (default: generated)"
    )
    parser.add_argument("--budget", type=int, default=2000)
    parser.add_argument(
        "--low-water", type=_fraction(0, 1, closed=False), nargs="+", default=list(LOW_WATERS)
    )
    parser.add_argument("--room", type=_fraction(0, 1, closed=True), nargs="+", default=list(ROOMS))
    args = parser.parse_args(argv)
    if args.budget < 1:
        parser.error("--budget must be >= 1")
    if args.data is not None and not args.data.is_file():
        parser.error(f"--data {args.data}: no such file")

    from memstrata.bench.prompt_cache import run

    print("low water | per-turn room | mean share | step/compaction turns | prompt tokens")
    for room in args.room:
        for low in args.low_water:
            result = run(
                data=args.data,
                budgets=(args.budget,),
                layouts=("cache",),
                low_water=low,
                volatile_room=room,
            )
            (row,) = result["rows"]
            print(
                f"{low:9.2f} | {room:13.2f} | {row['mean_share']:10.3f} | "
                f"{row['event_share_of_turns']:21.3f} | {row['mean_prompt_tokens']:13.1f}",
                flush=True,
            )
    return 0


if __name__ == "__main__":
    sys.exit(main())
