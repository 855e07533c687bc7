"""The shared vocabulary: scopes, messages, conversations, file references.

Stored records (:class:`Message`, :class:`Conversation`) are frozen slotted
dataclasses: they are built on every read, so they must be cheap. Inputs that a
caller writes (:class:`NewMessage`, :class:`FileRef`, :class:`ToolCall`) are
pydantic models, validated once at the edge.
"""

from __future__ import annotations

import re
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta
from enum import StrEnum
from typing import Any, Generic, Literal, TypeVar

from pydantic import BaseModel, ConfigDict, Field, model_validator

from memstrata.encoding import to_json
from memstrata.errors import InvalidInput
from memstrata.instants import EPOCH, to_micros

__all__ = [
    "Conversation",
    "FileRef",
    "Message",
    "MessagePatch",
    "NewMessage",
    "Page",
    "Role",
    "Scope",
    "Status",
    "ToolCall",
    "dump_files",
    "dump_tool_calls",
    "occurred_micros",
]

_NAME = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:@+\-]{0,127}$")


class Role(StrEnum):
    SYSTEM = "system"
    USER = "user"
    ASSISTANT = "assistant"
    TOOL = "tool"


class Status(StrEnum):
    COMPLETE = "complete"
    PENDING = "pending"


@dataclass(frozen=True, slots=True)
class Scope:
    """Who owns data: a tenant (app or workspace), a user, and optionally an agent.

    Names are 1-128 characters of letters, digits and ``._:@+-``, starting with a
    letter or digit, so they are safe in keys, paths and logs.
    """

    tenant: str
    user: str
    agent: str | None = None

    def __post_init__(self) -> None:
        for name in ("tenant", "user", "agent"):
            value = getattr(self, name)
            if value is None and name == "agent":
                continue
            if not isinstance(value, str) or not _NAME.fullmatch(value):
                raise InvalidInput(
                    f"scope {name} must be 1-128 characters of letters, digits and ._:@+- "
                    f"starting with a letter or digit, got {value!r}",
                    field=name,
                )

    @property
    def agent_key(self) -> str:
        """The agent as stored: ``''`` stands for "no agent" so equality works in SQL."""
        return self.agent or ""


class FileRef(BaseModel):
    """A reference to a file attached to a message; the bytes live elsewhere."""

    model_config = ConfigDict(frozen=True, extra="forbid")

    type: Literal["image", "audio", "video", "document", "custom"]
    transfer_method: Literal["local_file", "remote_url", "tool_file"]
    upload_file_id: str | None = None
    tool_file_id: str | None = None
    url: str | None = None
    belongs_to: Literal["user", "assistant"] = "user"
    filename: str | None = None
    mime_type: str | None = None
    #: Image detail for the model (Dify's image_config.detail): None means ``high``.
    detail: Literal["low", "high", "auto"] | None = None
    #: Pixel size, when known: an image's token cost follows it (see memstrata.tokens).
    width: int | None = Field(default=None, ge=1, le=100_000)
    height: int | None = Field(default=None, ge=1, le=100_000)

    @model_validator(mode="after")
    def _locator_present(self) -> FileRef:
        needed = {
            "local_file": self.upload_file_id,
            "remote_url": self.url,
            "tool_file": self.tool_file_id,
        }[self.transfer_method]
        if not needed:
            field_name = {
                "local_file": "upload_file_id",
                "remote_url": "url",
                "tool_file": "tool_file_id",
            }[self.transfer_method]
            raise ValueError(f"transfer_method {self.transfer_method} needs {field_name}")
        return self


class ToolCallFunction(BaseModel):
    model_config = ConfigDict(frozen=True, extra="forbid")
    name: str = Field(min_length=1)
    arguments: str = ""


class ToolCall(BaseModel):
    """An OpenAI-shaped tool call made by an assistant message."""

    model_config = ConfigDict(frozen=True, extra="forbid")
    id: str = Field(min_length=1)
    type: Literal["function"] = "function"
    function: ToolCallFunction


class NewMessage(BaseModel):
    """What a caller sends to append a message.

    ``parent_id`` left out means "after the active leaf"; ``None`` starts a new
    root; an id makes a child of that message. The difference between "left out"
    and ``None`` is kept in ``model_fields_set``.
    """

    model_config = ConfigDict(extra="forbid")

    id: str | None = None
    role: Role
    content: str = ""
    parent_id: str | None = None
    files: list[FileRef] = Field(default_factory=list)
    tool_calls: list[ToolCall] = Field(default_factory=list)
    tool_call_id: str | None = None
    status: Status = Status.COMPLETE
    metadata: dict[str, Any] = Field(default_factory=dict)
    occurred_at: datetime | None = None

    @property
    def parent_given(self) -> bool:
        return "parent_id" in self.model_fields_set

    @model_validator(mode="after")
    def _shape(self) -> NewMessage:
        if self.status is Status.PENDING:
            if self.role is not Role.ASSISTANT:
                raise ValueError("only an assistant message can be pending")
            if self.content:
                raise ValueError("a pending message must have empty content")
        elif not self.content and not self.tool_calls and not self.files:
            raise ValueError(
                "content may be empty only for a pending message or one with tool calls or files"
            )
        if self.tool_calls and self.role is not Role.ASSISTANT:
            raise ValueError("only an assistant message can carry tool_calls")
        if self.role is Role.TOOL and not self.tool_call_id:
            raise ValueError("a tool message needs tool_call_id")
        if self.tool_call_id is not None and self.role is not Role.TOOL:
            raise ValueError("only a tool message can carry tool_call_id")
        return self


class MessagePatch(BaseModel):
    """Completion of a pending assistant message (the only mutable kind)."""

    model_config = ConfigDict(extra="forbid")

    content: str = ""
    status: Literal["complete"] = "complete"
    files: list[FileRef] | None = None
    tool_calls: list[ToolCall] | None = None
    metadata: dict[str, Any] | None = None

    @model_validator(mode="after")
    def _not_empty(self) -> MessagePatch:
        if not self.content and not self.tool_calls and not self.files:
            raise ValueError("a completed message needs content, tool_calls or files")
        return self


def dump_files(files: Iterable[FileRef]) -> list[dict[str, Any]]:
    """File references as JSON-ready dicts (unset locators left out)."""
    return [f.model_dump(exclude_none=True) for f in files]


def dump_tool_calls(calls: Iterable[ToolCall]) -> list[dict[str, Any]]:
    """Tool calls in their OpenAI shape."""
    return [c.model_dump() for c in calls]


@dataclass(frozen=True, slots=True)
class Message:
    """A stored message. ``seq`` is server order; ``branch_tokens`` is the token
    count of the path from the root down to and including this message (store
    encoding), so "tokens between X and the leaf" is one subtraction.

    ``position`` is the message's place in its conversation (1, 2, 3, ...): what answers
    show as ``seq``, as the store-wide counter would tell one user how much others write.
    From the remote client, ``seq`` and ``position`` are both that number."""

    id: str
    conversation_id: str
    parent_id: str | None
    role: Role
    content: str
    files: tuple[FileRef, ...]
    tool_calls: tuple[ToolCall, ...]
    tool_call_id: str | None
    status: Status
    metadata: dict[str, Any]
    occurred_at: datetime
    created_at: datetime
    # Defaults only for what the remote client rebuilds from an answer, which carries the
    # position (as ``seq``) and not the store's counter: there ``seq`` is the position too.
    seq: int = 0
    depth: int = 0
    token_count: int = 0
    branch_tokens: int = 0
    position: int = 0

    def __post_init__(self) -> None:
        if not self.seq and self.position:
            object.__setattr__(self, "seq", self.position)

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict of every public field: the REST shape."""
        return to_json(self)


class _Held:
    """An ``int`` given for a datetime field, kept apart from stored microseconds (so it
    reads back as given: only the store's rows are read lazily)."""

    __slots__ = ("value",)

    def __init__(self, value: int) -> None:
        self.value = value


class _Instant:
    """A datetime field of :class:`Message`, built on first read.

    A stored row leaves the instant in the field's slot as the store keeps it (integer
    microseconds since the epoch, UTC); the ``datetime`` is built and kept the first time
    the field is read. Most reads never look at it (a history for a model call): building
    two datetimes per row was a quarter of turning a row into a ``Message``. Everything
    that reads the field (equality, hashing, repr, pickling, ``to_dict``, ``replace``)
    reads it through here, so it only ever sees the datetime.
    """

    __slots__ = ("_get", "_set")

    def __init__(self, slot: Any) -> None:  # the slot's own member descriptor
        self._get = slot.__get__
        self._set = slot.__set__

    def __get__(self, obj: object, owner: type | None = None) -> Any:
        if obj is None:
            return self
        value = self._get(obj)
        if type(value) is int:
            value = EPOCH + timedelta(0, 0, value)  # exact: integer arithmetic
            self._set(obj, value)
        elif type(value) is _Held:
            return value.value
        return value

    def __set__(self, obj: object, value: Any) -> None:
        self._set(obj, _Held(value) if type(value) is int else value)


for _name in ("occurred_at", "created_at"):
    setattr(Message, _name, _Instant(Message.__dict__[_name]))
del _name

_OCCURRED_SLOT = Message.__dict__["occurred_at"]._get


def occurred_micros(message: Message) -> int:
    """``to_micros(message.occurred_at)``, without building the datetime while the field
    still holds the stored microseconds (a recall candidate needs only its second).

    The same number: ``to_micros`` multiplies ``timestamp()``, which for such a datetime
    is the microseconds divided by 10**6 in one correctly rounded division."""
    raw = _OCCURRED_SLOT(message)
    if type(raw) is int:
        return int(raw / 1_000_000 * 1_000_000)
    return to_micros(message.occurred_at)


@dataclass(frozen=True, slots=True)
class Conversation:
    id: str
    tenant: str
    user: str
    agent: str | None
    title: str | None
    metadata: dict[str, Any]
    active_leaf_id: str | None
    created_at: datetime
    updated_at: datetime
    message_count: int

    def to_dict(self) -> dict[str, Any]:
        """JSON-ready dict: the REST shape (no tenant or user; the scope knows them)."""
        return to_json(self)


T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Page(Generic[T]):
    """One page of a cursor-paginated list."""

    items: list[T]
    next_cursor: str | None = field(default=None)


def file_placeholder(ref: FileRef) -> str:
    """The text that stands for a file where only text goes (and what its tokens count)."""
    if ref.type == "image":
        return "[image]"
    name = ref.filename or ref.upload_file_id or ref.tool_file_id or ref.url or ""
    return f"[{ref.type}: {name}]" if name else f"[{ref.type}]"
