"""What prompt provenance keeps: a context record, the ids it injected, and their uses."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memstrata.encoding import to_json

__all__ = ["ContextRecord", "FactUse", "Provenance", "RecordItem"]


@dataclass(frozen=True, slots=True)
class RecordItem:
    """One injected item, by id: ``tier`` is where it sat in the prompt, ``kind`` what it
    is (``message``, ``fact``, ``summary``, ``working``, ``plan``, ``profile``,
    ``iteration``, or ``item`` for a tier a feature added). ``conversation_id`` names a
    message's conversation (a recalled message may come from another one); ``version``
    is a fact's ``updated_at`` (microseconds) or the version of a summary, a working
    memory or a plan. ``state`` says what the item is now: ``present`` or ``deleted``
    for a message; ``active``, ``changed`` (edited since), ``superseded``, ``removed``
    or ``deleted`` (a tombstone: only the id is left) for a fact; ``recorded`` for the
    rest (not followed)."""

    tier: str
    kind: str
    id: str
    conversation_id: str | None
    version: int | None
    state: str

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)


@dataclass(frozen=True, slots=True)
class ContextRecord:
    """A recorded context assembly: when, of which branch, under which budget, its
    report (ids and token counts, never content) and the items it injected."""

    id: str
    conversation_id: str
    leaf_id: str | None
    budget: int
    report: dict[str, Any]
    reply_id: str | None
    created_at: datetime
    linked_at: datetime | None
    items: tuple[RecordItem, ...] = ()

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)


@dataclass(frozen=True, slots=True)
class Provenance:
    """What the model saw before a reply: the record linked to it, or None."""

    conversation_id: str
    message_id: str
    record: ContextRecord | None

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)


@dataclass(frozen=True, slots=True)
class FactUse:
    """A reply whose prompt held a fact: the reply, the record, and when it was recorded."""

    conversation_id: str
    message_id: str
    context_id: str
    recorded_at: datetime
    version: int | None

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)
