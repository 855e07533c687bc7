"""Node memory as the API returns it: one stored turn, and a node's thread."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memstrata.domain.history import History
from memstrata.encoding import to_json
from memstrata.types import FileRef, Message, dump_files

__all__ = ["NodeHistory", "NodeTurn", "Turn"]


@dataclass(frozen=True, slots=True)
class Turn:
    """One dialogue turn of a node: a user input and the assistant's answer.

    ``message_id`` and ``parent_message_id`` are the caller's ids (Dify's
    Message ids); ``uid`` is unique per stored turn, so a turn read twice
    during a compaction is still returned once. ``revision`` is None for a
    message's first turns; turns that replace them carry the id of the flush
    that wrote them (see :mod:`memstrata.nodes.revisions`).
    """

    uid: str
    message_id: str
    parent_message_id: str | None
    user_content: str
    user_files: tuple[FileRef, ...]
    assistant_content: str
    assistant_files: tuple[FileRef, ...]
    created_at: int  # microseconds since the epoch
    revision: str | None = None

    def to_json(self) -> dict[str, Any]:
        out: dict[str, Any] = {
            "uid": self.uid,
            "message_id": self.message_id,
            "parent_message_id": self.parent_message_id,
            "user": self.user_content,
            "assistant": self.assistant_content,
            "created_at": self.created_at,
        }
        if self.user_files:
            out["user_files"] = dump_files(self.user_files)
        if self.assistant_files:
            out["assistant_files"] = dump_files(self.assistant_files)
        if self.revision is not None:
            out["revision"] = self.revision
        return out

    @classmethod
    def from_json(cls, d: dict[str, Any]) -> Turn:
        return cls(
            uid=d["uid"],
            message_id=d["message_id"],
            parent_message_id=d.get("parent_message_id"),
            user_content=d["user"],
            user_files=tuple(FileRef.model_validate(f) for f in d.get("user_files", ())),
            assistant_content=d["assistant"],
            assistant_files=tuple(FileRef.model_validate(f) for f in d.get("assistant_files", ())),
            created_at=int(d["created_at"]),
            revision=d.get("revision"),
        )

    def to_dict(self) -> dict[str, Any]:
        """The public shape (REST)."""
        return to_json(self)


@dataclass(frozen=True, slots=True)
class NodeTurn:
    """A kept turn with its files as the resolver rebuilt them."""

    turn: Turn
    user_files: list[Any]
    assistant_files: list[Any]


@dataclass(frozen=True, slots=True)
class NodeHistory:
    """A node's token-budgeted thread: the same shape as conversation history, plus the
    turns (files resolved) and what the read cost."""

    current_message_id: str | None
    history: History
    turns: list[NodeTurn]
    objects_read: int = field(default=0, compare=False)
    damaged: list[str] = field(default_factory=list)

    @property
    def messages(self) -> list[Message]:
        return self.history.messages

    @property
    def tokens(self) -> int:
        return self.history.tokens

    @property
    def truncated(self) -> bool:
        return self.history.truncated

    @property
    def over_budget(self) -> bool:
        return self.history.over_budget

    def to_openai(self, resolver: Any = None) -> list[dict[str, Any]]:
        return self.history.to_openai(resolver)

    def to_text(self, human_prefix: str = "Human", ai_prefix: str = "Assistant") -> str:
        return self.history.to_text(human_prefix, ai_prefix)

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)
