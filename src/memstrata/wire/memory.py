"""Wire models of memory health and consolidation (``/v1/memory/...``)."""

from __future__ import annotations

from datetime import datetime

from pydantic import BaseModel, ConfigDict, Field

from memstrata.domain.memory import (
    Consolidation,
    ConsolidationChange,
    ConsolidationRevert,
    FactBrief,
    HealthCheck,
    HealthExample,
    MemoryHealth,
    MemorySizes,
)
from memstrata.wire._codec import Wire
from memstrata.wire.jobs import JobOut

__all__ = [
    "ConsolidateIn",
    "ConsolidationChangeOut",
    "ConsolidationJobOut",
    "ConsolidationOut",
    "ConsolidationRevertOut",
    "FactBriefOut",
    "HealthCheckOut",
    "HealthExampleOut",
    "MemoryHealthOut",
    "MemorySizesOut",
]


class FactBriefOut(Wire):
    __domain__ = FactBrief

    id: str
    category: str
    content: str = Field(description="The fact's content, cut at 120 characters.")


class HealthExampleOut(Wire):
    __domain__ = HealthExample

    facts: list[FactBriefOut]
    note: str = Field(description="Why these facts were picked.")


class HealthCheckOut(Wire):
    __domain__ = HealthCheck

    count: int | None = Field(description="Findings; null when unknown (see `known`).")
    examples: list[HealthExampleOut]
    known: bool = Field(description="False when this check cannot be made here.")


class MemorySizesOut(Wire):
    __domain__ = MemorySizes

    active: int
    superseded: int
    removed: int
    evicted: int
    profile_sections: int = Field(description="Profile sections with a summary.")
    fact_tokens: int = Field(description="Tokens of the active facts analysed.")
    profile_tokens: int


class MemoryHealthOut(Wire):
    __domain__ = MemoryHealth

    generated_at: datetime
    stale_days: int
    analysed: int = Field(description="Active facts analysed (oldest first).")
    truncated: bool = Field(description="More active facts exist than were analysed.")
    semantic: bool = Field(description="Embeddings were used to find near duplicates.")
    usage_known: bool = Field(
        description="Whether fact usage in recorded contexts is known; when false, "
        "`unused.count` is null and stale facts are judged without it."
    )
    sizes: MemorySizesOut
    duplicates: HealthCheckOut
    contradictions: HealthCheckOut
    stale: HealthCheckOut
    unused: HealthCheckOut


class ConsolidationChangeOut(Wire):
    __domain__ = ConsolidationChange

    kind: str = Field(description="merge (near duplicates) or supersede (a contradiction).")
    superseded: list[FactBriefOut] = Field(description="The facts this change supersedes.")
    target_id: str | None = Field(
        description="The fact they are superseded by; null for new merged content not applied yet."
    )
    content: str = Field(description="The content of the target (new merged content).")
    category: str
    new_fact: bool = Field(description="The target is a new, merged fact.")
    reason: str


class ConsolidationOut(Wire):
    __domain__ = Consolidation

    id: str = Field(description="The consolidation's id: revert it with this id.")
    mode: str = Field(description="llm or deterministic.")
    dry_run: bool
    applied: bool
    changes: list[ConsolidationChangeOut]
    notes: list[str]


class ConsolidationJobOut(BaseModel):
    job: JobOut = Field(
        description="The queued longterm.consolidate job; its id is the consolidation's id."
    )


class ConsolidationRevertOut(Wire):
    __domain__ = ConsolidationRevert

    consolidation_id: str
    restored: list[str] = Field(description="Facts active again.")
    retired: list[str] = Field(description="Merged facts superseded by a restored fact.")


class ConsolidateIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    dry_run: bool = Field(default=True, description="Plan and show the diff only (default).")
    semantic: bool = Field(
        default=False, description="Find near duplicates by embedding similarity too."
    )
    background: bool | None = Field(
        default=None,
        description="Apply as a longterm.consolidate job (202). Default: a job when a "
        "model plans it, at once (200) otherwise.",
    )
