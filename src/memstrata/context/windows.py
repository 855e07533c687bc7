"""Window sizes: each model's context window (a small table), the recent window's default,
and where a window that advances in steps starts."""

from __future__ import annotations

__all__ = [
    "COMPACT_AT",
    "DEFAULT_LOW_WATER",
    "DEFAULT_VOLATILE_ROOM",
    "DEFAULT_WINDOW",
    "RECALL_ROOM_MAX",
    "context_window",
    "step_size",
    "step_start",
]

DEFAULT_WINDOW = 20  # n8n's lastMessages: messages a compaction leaves out of the summary
#: What a window that has just stepped keeps of its share (see :func:`step_start`).
DEFAULT_LOW_WATER = 0.7
#: The cache layout asks for a compaction once the window fills this much of its share, so
#: the summary comes in (and the window steps with it) before the window must step alone.
COMPACT_AT = 0.9
#: The share of the budget the per-turn tiers (recall, ...) keep in a long conversation.
DEFAULT_VOLATILE_ROOM = 0.05
#: The most of that room the recall tier takes (about four recalled lines): its block is
#: new to a provider's cache every turn, so at a large budget 5 % would be most of what a
#: turn cannot reuse (``memstrata bench prompt-cache``: mean share 0.84 -> 0.88 at 8000).
#: Working memory and the plan change only when they are updated: they keep the 5 %.
RECALL_ROOM_MAX = 160
_DEFAULT_CONTEXT_WINDOW = 128_000
# Longest prefix wins (model names lowercased, any "org/" prefix removed).
_CONTEXT_WINDOWS: tuple[tuple[str, int], ...] = (
    ("gpt-4o", 128_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4-turbo", 128_000),
    ("gpt-4", 8_192),
    ("gpt-3.5-turbo", 16_385),
    ("gpt-5", 400_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4", 200_000),
    ("claude", 200_000),
    ("gemini-1.5", 1_048_576),
    ("gemini-2", 1_048_576),
    ("llama-3", 128_000),
    ("mistral-large", 128_000),
)


def context_window(model: str | None) -> int:
    """The model's context window from a small table (prefix match), else 128k."""
    if not model:
        return _DEFAULT_CONTEXT_WINDOW
    name = model.strip().lower().rsplit("/", 1)[-1]
    best = ("", _DEFAULT_CONTEXT_WINDOW)
    for prefix, size in _CONTEXT_WINDOWS:
        if name.startswith(prefix) and len(prefix) > len(best[0]):
            best = (prefix, size)
    return best[1]


def step_size(limit: int, low_water: float = DEFAULT_LOW_WATER, min_step: int = 1) -> int:
    """How far a stepped window's start moves at a step: ``(1 - low_water)`` of its share,
    at least ``min_step`` while that is at most half the share, never more than the share."""
    return min(limit, max(1, min(min_step, limit // 2), int((1.0 - low_water) * limit)))


def step_start(
    base: int, end: int, limit: int, low_water: float = DEFAULT_LOW_WATER, min_step: int = 1
) -> int:
    """Where a window that advances in steps starts, in cumulative tokens of its branch.

    ``base`` is where the window may start at the earliest (the summary's cover point or
    the system run's end), ``end`` where the branch ends, ``limit`` the window's share.
    While the branch from ``base`` fits, the start is ``base``. Once it does not, the start
    moves forward in steps (:func:`step_size`), the fewest that make the rest fit: right
    after a step the window holds about ``low_water`` of its share, and the start stays put
    (new turns only append) until the next step. The start is a function of the branch
    alone, so every call, on any process, finds the same one; the window begins at the
    first turn that starts there or later.
    """
    over = end - base - limit
    if over <= 0 or limit <= 0:
        return base
    step = step_size(limit, low_water, min_step)
    return base + -(-over // step) * step
