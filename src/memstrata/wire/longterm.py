"""Wire models of long-term memory: facts, their history, the profile."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated

from pydantic import BaseModel, Field

from memstrata.domain.longterm import Fact, FactEvent, FactSource, ProfileSection
from memstrata.wire._codec import OmitNone, Wire

__all__ = [
    "FactEventOut",
    "FactHistoryOut",
    "FactOut",
    "FactPage",
    "FactSourceOut",
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
