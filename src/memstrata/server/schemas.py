"""Request and response models of the REST surface, for validation and the OpenAPI document.

Responses are built from the domain objects' ``to_dict()``; these models
describe them for clients (``/openapi.json``) and are kept in step by tests.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from pydantic import BaseModel, ConfigDict, Field

from memstrata.types import FileRef, Role, Status, ToolCall

__all__ = [
    "ConversationCreate",
    "ConversationOut",
    "ConversationPage",
    "ConversationPatch",
    "FactCreate",
    "FactHistoryOut",
    "FactOut",
    "FactPage",
    "FactPatch",
    "HistoryMessageOut",
    "HistoryOut",
    "JobOut",
    "JobPage",
    "MessageOut",
    "MessagePage",
    "ProfileOut",
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


class ConversationOut(BaseModel):
    id: str
    title: str | None
    metadata: dict[str, Any]
    agent: str | None
    active_leaf_id: str | None
    message_count: int
    created_at: datetime
    updated_at: datetime


class ConversationPage(BaseModel):
    items: list[ConversationOut]
    next_cursor: str | None


class MessageOut(BaseModel):
    id: str
    conversation_id: str
    parent_id: str | None
    role: Role
    content: str
    files: list[FileRef]
    tool_calls: list[ToolCall]
    tool_call_id: str | None
    status: Status
    metadata: dict[str, Any]
    occurred_at: datetime
    created_at: datetime
    seq: int = Field(description="Server order; decides which message is newest.")
    depth: int
    token_count: int
    branch_tokens: int = Field(description="Tokens of the path from the root to this message.")


class MessagePage(BaseModel):
    items: list[MessageOut]
    next_cursor: str | None


class HistoryMessageOut(BaseModel):
    id: str
    role: Role
    content: str
    files: list[FileRef]
    tool_calls: list[ToolCall]
    tool_call_id: str | None


class HistoryOut(BaseModel):
    leaf_id: str | None
    messages: list[HistoryMessageOut]
    tokens: int
    truncated: bool = Field(description="Older turns were left out to fit the budget.")
    over_budget: bool = Field(description="The newest turn alone is over max_tokens.")


class UserOut(BaseModel):
    id: str
    created_at: datetime


class UserPage(BaseModel):
    items: list[UserOut]
    next_cursor: str | None


class JobOut(BaseModel):
    id: str
    kind: str
    key: str | None
    user: str | None
    agent: str | None
    conversation_id: str | None
    payload: dict[str, Any]
    flags: dict[str, bool]
    status: str = Field(description="queued, running, done or dead.")
    attempts: int
    max_attempts: int
    run_after: datetime
    first_enqueued_at: datetime
    enqueue_count: int = Field(description="How many enqueues were merged into this job.")
    last_error: str | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    blocked: str | None = Field(
        default=None,
        description="Why a queued job cannot run yet (e.g. extraction needs an LLM); it waits.",
    )


class JobPage(BaseModel):
    items: list[JobOut]
    next_cursor: str | None
    worker_warning: str | None = Field(
        default=None,
        description="Set when some of these jobs are due and no worker has been seen lately "
        "(nothing will run them until one starts): one line saying what to start.",
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


class FactSourceOut(BaseModel):
    conversation_id: str
    message_id: str | None


class FactOut(BaseModel):
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


class FactPage(BaseModel):
    items: list[FactOut]
    next_cursor: str | None


class FactEventOut(BaseModel):
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


class ProfileSectionOut(BaseModel):
    summary: str
    updated_at: datetime | None


class ProfileOut(BaseModel):
    sections: dict[str, ProfileSectionOut]
