"""Tiers of a context and the protocol that lets features add their own.

A tier is one kind of material a context is assembled from. Built in: ``system``
(the branch's leading system messages, always kept), ``recent`` (the recent window),
``summary`` (the rolling compaction summary), ``working`` (the user's and the
conversation's working memory), ``plan`` and ``iterations`` (a named task's failed
attempts, see :mod:`memstrata.context.briefing`). Features plug further tiers in (``facts``, ``profile``, ``recall``) with a
:class:`TierProvider`: given a :class:`TierRequest` it returns whole
:class:`TierItem` objects, best first, each with its token count and provenance.
A provider is a sans-IO operation, so it runs inside the same read transaction as
the rest of the assembly, on every backend, sync or async. Anything slow or remote
(embedding the query) happens before that transaction: the facade passes the
result in (``TierRequest.query_vector``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Protocol

from memstrata.domain.context import TierItem
from memstrata.errors import InvalidInput
from memstrata.runtime import Runtime
from memstrata.storage.plan import Op
from memstrata.tokens import Tokenizer
from memstrata.types import Scope

__all__ = [
    "BLOCK_TAGS",
    "DEFAULT_ORDER",
    "GROUP_CAPS",
    "GROUP_LEADS",
    "MESSAGE_ORDER",
    "TierItem",
    "TierPolicy",
    "TierProvider",
    "TierRequest",
    "default_policies",
]

# Budget priority: who gets tokens first (``system`` is always kept, like history's).
DEFAULT_ORDER = (
    "recent",
    "summary",
    "facts",
    "profile",
    "working",
    "plan",
    "iterations",
    "recall",
)
# Where each tier's block sits in the messages handed to the model.
MESSAGE_ORDER = (
    "system",
    "profile",
    "facts",
    "working",
    "plan",
    "iterations",
    "summary",
    "recall",
    "recent",
)
# Each injected tier is one system message wrapped in this tag.
BLOCK_TAGS: Mapping[str, str] = {
    "profile": "user-profile",
    "facts": "memory",
    "working": "working-memory",
    "plan": "plan",
    "iterations": "failed-attempts",
    "summary": "conversation-summary",
    "recall": "recalled-messages",
}


@dataclass(frozen=True, slots=True)
class TierRequest:
    """What a provider gets: who asks, about which branch, and how much room is left.

    ``query`` is the caller's query, or else the content of the newest user message
    on the branch. ``query_vector`` is that query embedded by ``embedder`` (the
    identity of its vector space) before the transaction, or None. ``window_ids``
    holds the messages already in the context (system run and recent window), and
    ``window_from_depth`` where the window starts on the branch; both are filled only
    for a provider that runs after the window (``after_window``).

    An item whose provenance has ``rejected`` (a reason) is reported, never injected;
    one whose ``covered_by`` names an item another tier put in the same context (e.g.
    a fact drawn from that message) is left out as already carried.
    """

    scope: Scope
    conversation_id: str
    leaf_id: str | None
    leaf_depth: int | None
    query: str | None
    allowance: int
    tokenizer: Tokenizer
    # Messages at or above this depth on the branch are covered by the summary in use.
    covered_depth: int | None = None
    query_vector: Sequence[float] | None = None
    embedder: str | None = None
    window_ids: frozenset[str] = frozenset()
    # The depth of the window's oldest message: the branch from there down to the leaf is
    # in the context (a range, so no window is too long to leave out).
    window_from_depth: int | None = None
    # ``as_of`` of the call (microseconds), or None for "now": the tiers that hold derived
    # data answer as of then (facts true then as known then, messages created by then).
    as_of: int | None = None

    def item(self, id: str, text: str, **provenance: Any) -> TierItem:
        """Build an item with its cost counted the way the assembler counts it."""
        return TierItem(id, text, self.tokenizer.count_text(text + "\n"), provenance)


class TierProvider(Protocol):
    """Supplies the items of one tier (``tier`` names it, e.g. ``"recall"``).

    A provider may also set ``after_window = True``: it then runs once the recent
    window is chosen and gets its message ids (to leave them out). The window cannot
    know in advance what such a tier will ask, so it holds back only the tier's
    ``minimum`` for it (its ``cap`` when the tier ranks above the window).
    """

    tier: str

    def provide(self, rt: Runtime, request: TierRequest) -> Op[list[TierItem]]: ...


@dataclass(frozen=True, slots=True)
class TierPolicy:
    """A tier's place in the budget: ``minimum`` is reserved for it (when it asks for
    that much) before higher-priority tiers take the rest; ``cap`` bounds it, and so does
    what its ``group`` has left."""

    priority: int
    minimum: int = 0
    cap: int | None = None
    #: Tiers naming one group share that group's cap (:data:`GROUP_CAPS`) as well.
    group: str | None = None

    def __post_init__(self) -> None:
        if self.minimum < 0 or (self.cap is not None and self.cap < self.minimum):
            raise InvalidInput("a tier needs 0 <= minimum <= cap", field="policies")


#: Caps shared by several tiers. ``memory``: the profile and facts blocks together stay
#: within 2000 tokens, DeerFlow's one budget for its injected ``<memory>`` (profile + facts).
GROUP_CAPS: Mapping[str, int] = {"memory": 2000}
#: The tier a group serves first. ``memory``: the profile, as DeerFlow injects it before
#: the facts; the facts are still granted before it (so that profile lines a granted fact
#: carries are left out), but only from what the profile's ask leaves of the group, and
#: never below their own ``minimum`` (500 by default: a quarter of the group).
GROUP_LEADS: Mapping[str, str] = {"memory": "profile"}


def default_policies() -> dict[str, TierPolicy]:
    # The long-term blocks share 2000 tokens (DeerFlow's injection limit); 500 are held for
    # the facts (corrections come first) when they ask for that much.
    caps = {"facts": 2000, "iterations": 1000}
    minimums = {"facts": 500}
    groups = {"facts": "memory", "profile": "memory"}
    return {
        name: TierPolicy(i, minimums.get(name, 0), caps.get(name), groups.get(name))
        for i, name in enumerate(DEFAULT_ORDER)
    }
