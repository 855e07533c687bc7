"""What the context feature returns: an assembled context and the report on it, a
rolling summary, the outcome of a compaction."""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from memstrata.domain.providers import to_anthropic
from memstrata.encoding import to_json
from memstrata.types import Message

__all__ = [
    "CacheReport",
    "CompactionResult",
    "Context",
    "ContextReport",
    "Fingerprint",
    "Summary",
    "TierItem",
    "TierReport",
]


@dataclass(slots=True)
class TierReport:
    asked: int = 0
    granted: int = 0
    items: int = 0
    # Why the tier is empty when it offered nothing usable (e.g. "below relevance floor").
    reason: str | None = None
    # Recall only: the caller's messages not yet searchable by meaning when the context
    # was assembled (past the read's catch-up bound; found by keywords meanwhile).
    pending: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)


@dataclass(slots=True)
class CacheReport:
    """What of a context a provider's prompt cache can serve.

    ``prefix_tokens``: the tokens of the leading whole messages identical to the previous
    context of the same branch (0 on the first); ``breakpoint``: the index in
    ``Context.messages`` of the last message of the stable part (None: nothing is stable),
    where a cache marker goes (see :meth:`Context.to_anthropic`).
    """

    prefix_tokens: int = 0
    breakpoint: int | None = None

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)


@dataclass(slots=True)
class ContextReport:
    """What went into a context and what did not, and why.

    ``sum(t.granted for t in tiers.values()) == total`` and ``total`` is the token
    count of ``Context.messages`` (``Tokenizer.count_message`` per message);
    ``total <= budget`` unless the newest turn alone is over it (``newest_turn_over_budget``).
    """

    budget: int
    encoding: str
    leaf_id: str | None
    tiers: dict[str, TierReport]
    dropped: list[dict[str, Any]] = field(default_factory=list)
    total: int = 0
    over_budget: bool = False
    newest_turn_over_budget: bool = False
    summary_id: str | None = None
    covered_up_to: str | None = None
    compaction_due: bool = False
    hash: str = ""
    cache: CacheReport = field(default_factory=CacheReport)
    #: The order of the messages (:mod:`memstrata.context.layout`).
    layout: str = "cache"

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)


@dataclass(frozen=True, slots=True)
class Summary:
    """A rolling summary of a branch, from its root up to and including ``up_to_id``."""

    id: str
    conversation_id: str
    up_to_id: str
    up_to_depth: int
    up_to_branch_tokens: int
    version: int
    previous_id: str | None
    content: str
    method: str
    created_at: Any

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)


@dataclass(frozen=True, slots=True)
class CompactionResult:
    """``outcome`` is ``compacted``, ``skipped`` (nothing worth doing) or ``failed`` (the
    previous summary stays; ``reason`` says why)."""

    outcome: str
    reason: str | None
    summary: object | None  # memstrata.context.summaries.Summary, or None

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)


@dataclass(frozen=True, slots=True)
class Context:
    """Messages ready for a chat-completion call, and the report on how they were chosen."""

    messages: list[dict[str, Any]]
    report: ContextReport
    window: list[Message]  # the recent window's stored messages, oldest first
    system: list[Message] = field(default_factory=list)  # the branch's leading system run
    # The items each injected tier put in (provenance records their ids, never their text).
    injected: dict[str, list[TierItem]] = field(default_factory=dict)
    # The id of the context record when the assembly was recorded (prompt provenance).
    context_id: str | None = None
    # The hash chain of ``messages`` (compared with the branch's next context), not sent.
    fingerprint: Fingerprint | None = field(default=None, repr=False, compare=False)
    # Under the cache layout, where the compaction it asks for should stop (a point of the
    # branch in cumulative tokens: the window's next step), so both change the prefix at once.
    compact_before: int | None = field(default=None, repr=False, compare=False)

    def to_openai(self) -> list[dict[str, Any]]:
        """OpenAI chat-completion messages, in the stable order (a copy of ``messages``).
        OpenAI caches a repeated prefix by itself; nothing marks it."""
        return [dict(m) for m in self.messages]

    def to_anthropic(self) -> dict[str, Any]:
        """``{"system": [...], "messages": [...]}`` for Anthropic's Messages API, with
        ``cache_control: {"type": "ephemeral"}`` on the stable part's last block."""
        return to_anthropic(self.messages, self.report.cache.breakpoint)

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)


@dataclass(frozen=True, slots=True)
class TierItem:
    """One indivisible piece of a tier: included whole or not at all.

    ``tokens`` is the item's cost inside its block (its text plus a line break)
    in the request's tokenizer; ``provenance`` says where it came from (message
    ids, fact ids, ...), so a caller can judge it against the active branch.
    """

    id: str
    text: str
    tokens: int
    provenance: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Fingerprint:
    """``chain[i]`` is (tokens of messages 0..i, hash of messages 0..i)."""

    leaf_id: str
    encoding: str
    chain: tuple[tuple[int, str], ...]

    def dumps(self) -> str:
        return json.dumps([list(link) for link in self.chain], separators=(",", ":"))
