"""Wire models of conversations, messages, history and users."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, Field

from memstrata.domain.history import History
from memstrata.types import Conversation, FileRef, Message, Role, Status, ToolCall
from memstrata.wire._codec import Attr, Wire

__all__ = [
    "ConversationOut",
    "ConversationPage",
    "HistoryMessageOut",
    "HistoryOut",
    "MessageOut",
    "MessagePage",
    "UserOut",
    "UserPage",
]


class ConversationOut(Wire):
    __domain__ = Conversation

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


class MessageOut(Wire):
    __domain__ = Message

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
    seq: Annotated[int, Attr("position")] = Field(
        description="The message's place in its conversation (1, 2, 3, ...): a later message "
        "has a larger one, so it decides which is newest."
    )
    depth: int
    token_count: int
    branch_tokens: int = Field(description="Tokens of the path from the root to this message.")


class MessagePage(BaseModel):
    items: list[MessageOut]
    next_cursor: str | None


class HistoryMessageOut(Wire):
    # A message of a history: what a model call needs (read from a stored message).
    # No docstring on the published models: it would change their schema.

    __domain__ = Message

    id: str
    role: Role
    content: str
    files: list[FileRef]
    tool_calls: list[ToolCall]
    tool_call_id: str | None


class HistoryOut(Wire):
    __domain__ = History

    leaf_id: str | None
    messages: list[HistoryMessageOut]
    tokens: int
    truncated: bool = Field(description="Older turns were left out to fit the budget.")
    over_budget: bool = Field(description="The newest turn alone is over max_tokens.")


class UserOut(Wire):
    id: str
    created_at: datetime


class UserPage(BaseModel):
    items: list[UserOut]
    next_cursor: str | None
