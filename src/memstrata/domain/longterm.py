"""The vocabulary of long-term memory: facts, profile sections, captured turns, and what
one extraction proposes.

A :class:`Fact` is a statement about a user that outlives a conversation. Facts are
never rewritten in place by extraction: a contradiction *supersedes* the old fact
(``status = superseded``, ``superseded_by`` = the new one), a removal or an eviction
only marks it, so the history of what memstrata believed stays readable.
"""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from enum import StrEnum
from typing import Any, Literal

from memstrata.encoding import to_json
from memstrata.errors import BackendUnavailable

__all__ = [
    "CATEGORIES",
    "PROFILE_LABELS",
    "PROFILE_SECTIONS",
    "ExtractionFailed",
    "Fact",
    "FactEvent",
    "FactOrigin",
    "FactSource",
    "FactStatus",
    "MemoryState",
    "ProfileSection",
    "PromptFact",
    "ProposedFact",
    "ProposedUpdate",
    "Removal",
    "Signal",
    "Turn",
    "UpdateParseError",
]

#: Fact categories (DESIGN.md). Anything else a model answers is mapped to ``context``.
CATEGORIES: tuple[str, ...] = (
    "preference",
    "knowledge",
    "context",
    "behavior",
    "goal",
    "correction",
)

#: The six profile sections, in the order they are shown (DeerFlow's memory document).
PROFILE_SECTIONS: tuple[str, ...] = (
    "workContext",
    "personalContext",
    "topOfMind",
    "recentMonths",
    "earlierContext",
    "longTermBackground",
)

#: How each section is labelled when injected.
PROFILE_LABELS: dict[str, str] = {
    "workContext": "Work",
    "personalContext": "Personal",
    "topOfMind": "Current focus",
    "recentMonths": "Recent months",
    "earlierContext": "Earlier",
    "longTermBackground": "Background",
}


class Signal(StrEnum):
    """What the user's recent messages say about the assistant's last answers."""

    CORRECTION = "correction"
    REINFORCEMENT = "reinforcement"


class FactStatus(StrEnum):
    ACTIVE = "active"
    SUPERSEDED = "superseded"  # replaced by a newer, contradicting fact
    REMOVED = "removed"  # the model judged it wrong or obsolete (reason kept)
    EVICTED = "evicted"  # pushed out by the cap on active facts


class FactOrigin(StrEnum):
    EXTRACTED = "extracted"
    MANUAL = "manual"
    IMPORTED = "imported"


@dataclass(frozen=True, slots=True)
class Turn:
    """One captured message, as the extractor sees it."""

    message_id: str
    role: Literal["user", "assistant"]
    text: str
    #: When it was said (the message's ``occurred_at``): shown to the model, and the
    #: default event time of what is extracted from it.
    occurred_at: datetime | None = None


@dataclass(frozen=True, slots=True)
class FactSource:
    conversation_id: str
    message_id: str | None


@dataclass(frozen=True, slots=True)
class Fact:
    id: str
    content: str
    category: str
    confidence: float
    status: FactStatus
    origin: FactOrigin
    agent: str | None
    superseded_by: str | None
    source_error: str | None
    reason: str | None
    sources: tuple[FactSource, ...]
    created_at: datetime
    updated_at: datetime
    #: Event time: when the fact became true in the world, and stopped being true (None:
    #: still is). From the source messages' ``occurred_at`` or a date the extraction found.
    valid_from: datetime | None = None
    valid_to: datetime | None = None
    #: System time: when memstrata recorded the fact, and stopped holding it as current
    #: (superseded, removed or evicted; None: it still does).
    recorded_at: datetime | None = None
    superseded_at: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)


@dataclass(frozen=True, slots=True)
class FactEvent:
    """One entry of a fact's history (created, edited, superseded, removed, ...)."""

    fact_id: str
    event: str
    content: str
    category: str
    confidence: float
    reason: str | None
    related_id: str | None
    at: datetime

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)


@dataclass(frozen=True, slots=True)
class ProfileSection:
    name: str
    summary: str
    updated_at: datetime | None
    #: Event time the section's text holds from, and when it was recorded (a section is
    #: replaced whole: the stored text is always the current version).
    valid_from: datetime | None = None
    recorded_at: datetime | None = None

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)


# -- what the extractor reads and proposes -------------------------------------------------


@dataclass(frozen=True, slots=True)
class PromptFact:
    """A fact as shown to the model: a short alias (``f1``, ``f2``, ...) instead of its id,
    so the model cannot mangle a UUID and the prompt stays small."""

    alias: str
    content: str
    category: str
    confidence: float
    manual: bool = False
    source_error: str | None = None


@dataclass(frozen=True, slots=True)
class MemoryState:
    profile: dict[str, str] = field(default_factory=dict)
    facts: tuple[PromptFact, ...] = ()


@dataclass(frozen=True, slots=True)
class ProposedFact:
    content: str
    category: str
    confidence: float
    source_error: str | None = None
    #: Aliases of the facts this one contradicts and replaces.
    supersedes: tuple[str, ...] = ()
    reason: str | None = None
    #: Event time the model found in the conversation ("since March", "until Friday").
    valid_from: datetime | None = None
    valid_to: datetime | None = None


@dataclass(frozen=True, slots=True)
class Removal:
    alias: str
    reason: str


@dataclass(frozen=True, slots=True)
class ProposedUpdate:
    """One extraction's answer, validated: profile sections to replace, new facts,
    removals. ``notes`` says what was dropped while normalising (for the update log)."""

    profile: dict[str, str] = field(default_factory=dict)
    new_facts: tuple[ProposedFact, ...] = ()
    removals: tuple[Removal, ...] = ()
    notes: tuple[str, ...] = ()


class ExtractionFailed(BackendUnavailable):
    """The model's answers stayed unusable for one update (each is kept in the update log);
    as a job, it is retried with backoff and ends as a dead letter."""

    code = "extraction_failed"


class UpdateParseError(ValueError):
    """The model's answer could not be used; ``raw`` keeps it for the update log."""

    def __init__(self, message: str, raw: str) -> None:
        super().__init__(message)
        self.raw = raw
