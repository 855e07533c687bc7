"""Results of the remote client that have no exact embedded type to rebuild.

The REST history carries each message's id, role, content, files and tool calls,
not the whole stored row; :class:`RemoteHistory` holds those and renders them
with the embedded renderers, so ``to_openai()`` gives the same bytes. A context's
report is the embedded :class:`~memstrata.context.ContextReport`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any, cast

from memstrata.domain.context import ContextReport
from memstrata.domain.providers import to_anthropic
from memstrata.domain.render import to_openai, to_text
from memstrata.types import FileRef, Message, Role, ToolCall
from memstrata.wire.context import ContextOut
from memstrata.wire.conversations import HistoryMessageOut, HistoryOut
from memstrata.wire.nodes import NodeHistoryOut

__all__ = ["HistoryMessage", "RemoteContext", "RemoteHistory", "RemoteNodeHistory"]


@dataclass(frozen=True, slots=True)
class HistoryMessage:
    """A message as history returns it over HTTP (the fields a model call needs)."""

    id: str
    role: Role
    content: str
    files: tuple[FileRef, ...]
    tool_calls: tuple[ToolCall, ...]
    tool_call_id: str | None

    def to_dict(self) -> dict[str, Any]:
        return HistoryMessageOut.encode(self)


def _as_messages(messages: Sequence[HistoryMessage]) -> Sequence[Message]:
    # The renderers read only role, content, files, tool_calls and tool_call_id.
    return cast(Sequence[Message], messages)


@dataclass(frozen=True, slots=True)
class RemoteHistory:
    """Like :class:`~memstrata.conversation.history.History`: messages oldest first."""

    leaf_id: str | None
    messages: list[HistoryMessage]
    tokens: int
    truncated: bool
    over_budget: bool

    def to_openai(self, resolver: Any = None) -> list[dict[str, Any]]:
        """OpenAI chat-completion messages (no ids), as ``History.to_openai``."""
        return to_openai(_as_messages(self.messages), resolver)

    def to_text(self, human_prefix: str = "Human", ai_prefix: str = "Assistant") -> str:
        return to_text(_as_messages(self.messages), human_prefix=human_prefix, ai_prefix=ai_prefix)

    def to_dict(self) -> dict[str, Any]:
        return HistoryOut.encode(self)


@dataclass(frozen=True, slots=True)
class RemoteContext:
    """Like :class:`~memstrata.context.Context`: chat messages and the report on them."""

    messages: list[dict[str, Any]]
    report: ContextReport
    context_id: str | None = None  # set when the assembly was recorded (record=True)

    def to_openai(self) -> list[dict[str, Any]]:
        """As :meth:`memstrata.context.Context.to_openai`."""
        return [dict(m) for m in self.messages]

    def to_anthropic(self) -> dict[str, Any]:
        """As :meth:`memstrata.context.Context.to_anthropic` (cache marker included)."""
        return to_anthropic(self.messages, self.report.cache.breakpoint)

    def to_dict(self) -> dict[str, Any]:
        return ContextOut.encode(self)


@dataclass(frozen=True, slots=True)
class RemoteNodeHistory:
    """Like :class:`~memstrata.nodes.thread.NodeHistory`, without the turns' resolved files."""

    current_message_id: str | None
    history: RemoteHistory

    @property
    def messages(self) -> list[HistoryMessage]:
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
        return NodeHistoryOut.encode(self)
