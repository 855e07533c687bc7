"""Request models of the REST surface, and the response models under their published names.

Responses are wire models (:mod:`memstrata.wire`): the one statement of each shape,
which the routes encode with and the remote client decodes with.
"""

from __future__ import annotations

from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from memstrata.wire.conversations import (
    ConversationOut,
    ConversationPage,
    HistoryMessageOut,
    HistoryOut,
    MessageOut,
    MessagePage,
    UserOut,
    UserPage,
)
from memstrata.wire.jobs import JobOut, JobPage
from memstrata.wire.longterm import (
    FactEventOut,
    FactHistoryOut,
    FactOut,
    FactPage,
    FactSourceOut,
    ProfileOut,
    ProfileSectionOut,
)

__all__ = [
    "ConversationCreate",
    "ConversationOut",
    "ConversationPage",
    "ConversationPatch",
    "FactCreate",
    "FactEventOut",
    "FactHistoryOut",
    "FactOut",
    "FactPage",
    "FactPatch",
    "FactSourceOut",
    "HistoryMessageOut",
    "HistoryOut",
    "JobOut",
    "JobPage",
    "MessageOut",
    "MessagePage",
    "ProfileOut",
    "ProfileSectionOut",
    "UserOut",
    "UserPage",
]


class ConversationCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    title: str | None = Field(default=None, max_length=1000)
    metadata: dict[str, Any] | None = None


class ConversationPatch(BaseModel):
    """Fields left out (or null) stay as they are."""

    model_config = ConfigDict(extra="forbid")

    title: str | None = Field(default=None, max_length=1000)
    metadata: dict[str, Any] | None = Field(default=None, description="Replaces the metadata.")
    active_leaf_id: str | None = Field(
        default=None,
        description="Make this message the active leaf: history, context and appends "
        "without parent_id follow its branch.",
    )


# -- long-term memory ---------------------------------------------------------------------


class FactCreate(BaseModel):
    model_config = ConfigDict(extra="forbid")

    content: str = Field(min_length=1, max_length=2000)
    category: str = Field(
        default="context",
        description="preference, knowledge, context, behavior, goal or correction.",
    )
    confidence: float = Field(default=1.0, ge=0.0, le=1.0)
    source_error: str | None = Field(
        default=None, max_length=2000, description="For a correction: what was wrong."
    )


class FactPatch(BaseModel):
    """Fields left out stay as they are."""

    model_config = ConfigDict(extra="forbid")

    content: str | None = Field(default=None, min_length=1, max_length=2000)
    category: str | None = None
    confidence: float | None = Field(default=None, ge=0.0, le=1.0)
    source_error: str | None = Field(default=None, max_length=2000)
