"""Where each tier sits in the messages handed to the model (pure).

Providers bill a prompt's cached prefix at a fraction of the input price, but only
while that prefix is byte-identical to an earlier request's. The ``cache`` layout
(the default) therefore orders the context by volatility: what changes least comes
first, what changes every turn comes last::

    system run · profile · facts · summary · window (all but the newest turn)
    · working · plan · iterations · recall · the newest turn

so from one turn to the next only the volatile blocks and the newest turn are new.
Facts keep their injection order (corrections first, then by confidence, age and id:
a total order, so the block changes only when the facts do). The ``classic`` layout
keeps the earlier order (every injected block before the window).

The *stable part* ends at ``breakpoint``: the index of the last message that the
next turn's context will repeat as long as nothing stable changes.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal, get_args

from memstrata.context.budget import block
from memstrata.context.tiers import MESSAGE_ORDER, TierItem
from memstrata.domain.render import to_openai
from memstrata.errors import InvalidInput
from memstrata.types import Message, Role

__all__ = [
    "CACHE_ORDER",
    "DEFAULT_LAYOUT",
    "LAYOUTS",
    "VOLATILE_TIERS",
    "Layout",
    "Rendered",
    "check_layout",
    "newest_turn_start",
    "render",
]

Layout = Literal["cache", "classic"]
LAYOUTS: tuple[str, ...] = get_args(Layout)
DEFAULT_LAYOUT: Layout = "cache"

#: The tiers whose blocks change from one turn to the next.
VOLATILE_TIERS = frozenset({"working", "plan", "iterations", "recall"})
#: The ``cache`` layout's stable tiers, in order (``recent`` is split around the volatile blocks).
CACHE_ORDER = ("system", "profile", "facts", "summary", "recent")
_VOLATILE_ORDER = ("working", "plan", "iterations", "recall")


def check_layout(layout: str) -> Layout:
    if layout not in LAYOUTS:
        raise InvalidInput(f"layout must be one of {', '.join(LAYOUTS)}", field="layout")
    return layout  # type: ignore[return-value]  # checked against the literal's values


@dataclass(frozen=True, slots=True)
class Rendered:
    """The messages in reading order, the tokens of each, the injected blocks among them
    (for the hash), and the index of the stable part's last message (None: nothing is)."""

    messages: list[dict[str, Any]]
    tokens: list[int]
    injected: list[dict[str, Any]]
    breakpoint: int | None


def newest_turn_start(window: Sequence[Message]) -> int:
    """The index in ``window`` of the newest user message (the newest turn's start), or
    ``len(window)`` when the window holds no user message."""
    for i in range(len(window) - 1, -1, -1):
        if window[i].role is Role.USER:
            return i
    return len(window)


class _Writer:
    def __init__(
        self,
        count: Callable[[Message], int],
        chosen: Mapping[str, list[TierItem]],
        granted: Mapping[str, int],
    ) -> None:
        self.count, self.chosen, self.granted = count, chosen, granted
        self.messages: list[dict[str, Any]] = []
        self.tokens: list[int] = []
        self.injected: list[dict[str, Any]] = []
        self.first_volatile: int | None = None

    def history(self, messages: Sequence[Message]) -> None:
        self.messages += to_openai(messages)
        self.tokens += map(self.count, messages)

    def inject(self, name: str) -> None:
        if name not in self.chosen:
            return
        if name in VOLATILE_TIERS and self.first_volatile is None:
            self.first_volatile = len(self.messages)
        injection = {"role": "system", "content": block(name, self.chosen[name])}
        self.messages.append(injection)
        self.tokens.append(self.granted[name])
        self.injected.append(injection)

    def done(self, stable_end: int) -> Rendered:
        last = stable_end - 1 if stable_end > 0 else None
        return Rendered(self.messages, self.tokens, self.injected, last)


def render(
    system: Sequence[Message],
    window: Sequence[Message],
    chosen: Mapping[str, list[TierItem]],
    *,
    count: Callable[[Message], int],
    granted: Mapping[str, int],
    layout: Layout = DEFAULT_LAYOUT,
) -> Rendered:
    """The context's messages under ``layout``: ``chosen`` holds each injected tier's items
    as they are written, ``granted`` the tokens of its block, ``count`` a message's tokens."""
    out = _Writer(count, chosen, granted)
    split = newest_turn_start(window)
    if layout == "classic":
        for name in MESSAGE_ORDER:
            if name == "system":
                out.history(system)
            elif name == "recent":
                out.history(window)
            else:
                out.inject(name)
        if out.first_volatile is not None:
            return out.done(out.first_volatile)
        return out.done(len(out.messages) - (len(window) - split))
    for name in CACHE_ORDER[:-1]:
        if name == "system":
            out.history(system)
        else:
            out.inject(name)
    out.history(window[:split])
    stable_end = len(out.messages)
    for name in _VOLATILE_ORDER:
        out.inject(name)
    out.history(window[split:])
    return out.done(stable_end)
