"""Wire models of prompt provenance: context records, a reply's provenance, fact usage."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, Field

from memstrata.domain.provenance import ContextRecord, FactUse, Provenance, RecordItem
from memstrata.wire._codec import Wire

__all__ = ["ContextRecordOut", "FactUseOut", "FactUsePage", "ProvenanceOut", "RecordItemOut"]


class RecordItemOut(Wire):
    __domain__ = RecordItem

    tier: str = Field(description="Where the item sat: system, recent, recall, facts, ...")
    kind: str = Field(
        description="message, fact, summary, working, plan, profile, iteration or item."
    )
    id: str
    conversation_id: str | None = Field(description="A message's conversation.")
    version: int | None = Field(
        description="A fact's updated_at (µs since the epoch); a summary's, working "
        "memory's or plan's version."
    )
    state: str = Field(
        description="Now: present or deleted (messages); active, changed, superseded, "
        "removed or deleted (facts: a tombstone, only the id is left); recorded (the rest)."
    )


class ContextRecordOut(Wire):
    __domain__ = ContextRecord

    id: str
    conversation_id: str
    leaf_id: str | None
    budget: int
    report: dict[str, Any] = Field(description="The context's report as recorded (no content).")
    reply_id: str | None = Field(description="The assistant message linked to this record.")
    created_at: datetime
    linked_at: datetime | None
    items: list[RecordItemOut]


class ProvenanceOut(Wire):
    __domain__ = Provenance

    conversation_id: str
    message_id: str
    record: ContextRecordOut | None = Field(
        description="The context record linked to the message; null when none is."
    )


class FactUseOut(Wire):
    __domain__ = FactUse

    conversation_id: str
    message_id: str
    context_id: str
    recorded_at: datetime
    version: int | None = Field(description="The fact's version the prompt held.")


class FactUsePage(BaseModel):
    items: list[FactUseOut]
    next_cursor: str | None
