"""Wire models of long-term memory: facts, their history, the profile."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, Field

from memstrata.domain.longterm import Fact, FactEvent, FactSource, ProfileSection
from memstrata.wire._codec import OmitNone, Wire

__all__ = [
    "ExportFactOut",
    "ExportHistoryOut",
    "ExportSectionOut",
    "ExportUserOut",
    "FactEventOut",
    "FactHistoryOut",
    "FactOut",
    "FactPage",
    "FactSourceOut",
    "MemoryExportOut",
    "ProfileOut",
    "ProfileSectionOut",
]


class FactSourceOut(Wire):
    __domain__ = FactSource

    conversation_id: str
    message_id: str | None


class FactOut(Wire):
    __domain__ = Fact

    id: str
    content: str
    category: str
    confidence: float
    status: str = Field(description="active, superseded, removed or evicted.")
    origin: str = Field(description="extracted, manual or imported.")
    agent: str | None
    superseded_by: str | None
    source_error: str | None
    reason: str | None
    sources: list[FactSourceOut]
    created_at: datetime
    updated_at: datetime
    valid_from: datetime | None = Field(
        default=None,
        description="Event time: when the fact became true in the world (from its source "
        "messages' occurred_at, a date the extraction found, or an import's own time).",
    )
    valid_to: datetime | None = Field(
        default=None, description="Event time: when it stopped being true (null: it still is)."
    )
    recorded_at: datetime | None = Field(
        default=None, description="System time: when memstrata recorded the fact."
    )
    superseded_at: datetime | None = Field(
        default=None,
        description="System time: when memstrata stopped holding it as current (superseded, "
        "removed or evicted; null: it still does).",
    )


class FactPage(BaseModel):
    items: list[FactOut]
    next_cursor: str | None


class FactEventOut(Wire):
    __domain__ = FactEvent

    fact_id: str
    event: str = Field(description="created, edited, superseded, removed or evicted.")
    content: str
    category: str
    confidence: float
    reason: str | None
    related_id: str | None
    at: datetime


class FactHistoryOut(BaseModel):
    items: list[FactEventOut]


class ProfileSectionOut(Wire):
    # One section of the profile; its name is the key it is sent under.

    __domain__ = ProfileSection

    summary: str
    updated_at: datetime | None
    # Left out of a section never written (its shape stays {summary, updated_at}).
    valid_from: Annotated[datetime | None, OmitNone] = Field(
        default=None, description="Event time the section's text holds from."
    )
    recorded_at: Annotated[datetime | None, OmitNone] = Field(
        default=None, description="System time: when this text was recorded."
    )


class ProfileOut(BaseModel):
    sections: dict[str, ProfileSectionOut]


# -- the memory export: DeerFlow's memory.json (its camelCase names are its own) -------------


class ExportSectionOut(BaseModel):
    summary: str
    updated_at: str = Field(
        alias="updatedAt",
        description="ISO 8601 in UTC with a `Z`; empty for a section never written.",
    )


class ExportUserOut(BaseModel):
    work_context: ExportSectionOut = Field(alias="workContext")
    personal_context: ExportSectionOut = Field(alias="personalContext")
    top_of_mind: ExportSectionOut = Field(alias="topOfMind")


class ExportHistoryOut(BaseModel):
    recent_months: ExportSectionOut = Field(alias="recentMonths")
    earlier_context: ExportSectionOut = Field(alias="earlierContext")
    long_term_background: ExportSectionOut = Field(alias="longTermBackground")


class ExportFactOut(BaseModel):
    id: str
    content: str
    category: str
    confidence: float
    created_at: str = Field(alias="createdAt", description="ISO 8601 in UTC with a `Z`.")
    source: str = Field(
        description="The source conversation's id, or `manual`, `imported` or `unknown`."
    )
    source_error: str | None = Field(
        default=None, alias="sourceError", description="Left out when the fact has none."
    )


class MemoryExportOut(BaseModel):
    version: str
    last_updated: str = Field(
        alias="lastUpdated", description="When the memory last changed (ISO 8601, UTC, `Z`)."
    )
    user: ExportUserOut
    history: ExportHistoryOut
    facts: list[ExportFactOut] = Field(description="The active facts.")
