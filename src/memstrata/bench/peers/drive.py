"""The linear-conversation workload of ``memstrata bench peers``, over any chat memory.

One conversation grows turn by turn (a user message, then the assistant's answer,
each stored durably before the next); when it reaches each checkpoint size the
token-budgeted history is read ``calls`` times. Growing one conversation through
the sizes, instead of rebuilding it per size, keeps a slow peer's run affordable
and measures exactly what a user of it lives with: the cost at the size reached.

A system that has not reached a size when ``time_limit_s`` of appending has passed
is stopped there and reported as ``over`` with what it did reach and how its append
cost grew, so a slow peer is never silently dropped.
"""

from __future__ import annotations

import statistics
import time
from collections.abc import Callable, Sequence
from typing import Any, Protocol

from memstrata.bench.report import ms, percentile

__all__ = ["ChatMemory", "History", "drive", "history_calls"]

GROWTH_WINDOW = 50  # turns at the start and at the end compared for the growth figure
HISTORY_BUDGET_S = 20.0  # history calls at one size stop after this, once MIN_CALLS ran
MIN_CALLS = 3
WARMUP_CALLS = 2


class History(Protocol):
    """What the timed reads need: a budgeted history."""

    def history(self, max_tokens: int) -> list[str]:
        """The newest messages that fit ``max_tokens``, oldest first, as their texts."""


class ChatMemory(History, Protocol):
    """What the workload needs from a chat memory: store a turn, read a budgeted history."""

    def append_turn(self, user: str, assistant: str) -> None:
        """Store both messages durably, user first."""

    def store_bytes(self) -> int:
        """Bytes the store occupies on disk now."""


def _median_ms(ns: Sequence[int]) -> float:
    return round(statistics.median(ns) / 1e6, 4) if ns else 0.0


def history_calls(
    chat: History,
    max_tokens: int,
    calls: int,
    count: Callable[[str], int],
    clock: Callable[[], int],
) -> dict[str, Any]:
    """Time ``calls`` budgeted reads (after warm-up ones): p50/p95, messages and tokens."""
    times: list[int] = []
    returned: list[int] = []
    tokens: list[int] = []
    spent = 0
    for i in range(WARMUP_CALLS + calls):
        t0 = clock()
        texts = chat.history(max_tokens)
        elapsed = clock() - t0
        if not texts:
            raise RuntimeError("history returned no messages: the workload would time nothing")
        if i < WARMUP_CALLS:
            continue
        times.append(elapsed)
        returned.append(len(texts))
        tokens.append(sum(count(t) for t in texts))
        spent += elapsed
        if len(times) >= MIN_CALLS and spent > HISTORY_BUDGET_S * 1e9:
            break
    return {
        "history_calls": len(times),
        "history_p50_ms": ms(percentile(times, 50)),
        "history_p95_ms": ms(percentile(times, 95)),
        "mean_messages": round(sum(returned) / len(returned), 2),
        "mean_tokens": round(sum(tokens) / len(tokens), 1),
    }


def drive(
    chat: ChatMemory,
    texts: Sequence[str],
    sizes: Sequence[int],
    *,
    max_tokens: int,
    calls: int,
    time_limit_s: float,
    count: Callable[[str], int],
    emit: Callable[[dict[str, Any]], None],
    clock: Callable[[], int] = time.perf_counter_ns,
) -> None:
    """Grow one conversation through ``sizes`` (messages, ascending), emitting one record
    per size: ``status`` "ok" with append and history figures, or "over" and the stop."""
    if len(texts) < max(sizes):
        raise ValueError("fewer texts than the largest size")
    turn_ns: list[int] = []  # per turn (two messages)
    appended = 0
    append_ns = 0
    for size in sorted(sizes):
        segment_start = appended
        segment_ns = 0
        while appended < size:
            if append_ns > time_limit_s * 1e9:
                head = turn_ns[:GROWTH_WINDOW]
                tail = turn_ns[-GROWTH_WINDOW:]
                first, last = _median_ms(head) / 2, _median_ms(tail) / 2
                emit(
                    {
                        "size": size,
                        "status": "over",
                        "limit_s": time_limit_s,
                        "reached": appended,
                        "append_s": round(append_ns / 1e9, 3),
                        "append_per_s": round(appended / (append_ns / 1e9), 1),
                        "append_ms_first": round(first, 4),
                        "append_ms_last": round(last, 4),
                        "append_growth": round(last / first, 2) if first else None,
                        "store_bytes": chat.store_bytes(),
                        **{
                            f"{k}_at_reached": v
                            for k, v in history_calls(
                                chat, max_tokens, MIN_CALLS, count, clock
                            ).items()
                        },
                    }
                )
                return
            t0 = clock()
            chat.append_turn(texts[appended], texts[appended + 1])
            elapsed = clock() - t0
            turn_ns.append(elapsed)
            segment_ns += elapsed
            append_ns += elapsed
            appended += 2
        emit(
            {
                "size": size,
                "status": "ok",
                "append_s": round(append_ns / 1e9, 3),
                "append_per_s": round(appended / (append_ns / 1e9), 1),
                "segment_append_per_s": round((appended - segment_start) / (segment_ns / 1e9), 1),
                "append_ms_last": round(_median_ms(turn_ns[-GROWTH_WINDOW:]) / 2, 4),
                "store_bytes": chat.store_bytes(),
                **history_calls(chat, max_tokens, calls, count, clock),
            }
        )
