"""Microsoft Agent Framework providers on memstrata.

- :class:`MemstrataHistoryProvider` (a ``HistoryProvider``) keeps an agent session's
  messages in a memstrata conversation of the user (one per session id, any string) and
  loads them back exactly before each run.
- :class:`MemstrataContextProvider` (a ``ContextProvider``) adds the user's memory to
  each run's instructions: for a given memstrata conversation, its memory blocks
  (profile, facts, summary, recalled messages, see :meth:`memstrata.Memory.context`);
  otherwise the user's facts and the past messages recall finds for the input.

Pass both as ``Agent(..., context_providers=[...])``.

Needs ``pip install 'memstrata[agent-framework]'``.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from memstrata.errors import MissingDependency, NotFound
from memstrata.integrations._common import (
    MemoryLike,
    append_rows,
    as_async,
    attach_native,
    native_of,
    session_conversation_id,
    user_memory_blocks,
)
from memstrata.types import Message as StoredMessage
from memstrata.types import Role, Scope

try:
    from agent_framework import (
        AgentSession,
        ContextProvider,
        HistoryProvider,
        Message,
        SessionContext,
        SupportsAgentRun,
    )
except ImportError:
    raise MissingDependency(
        "the Agent Framework integration needs agent-framework-core: "
        "pip install 'memstrata[agent-framework]'"
    ) from None

__all__ = ["MemstrataContextProvider", "MemstrataHistoryProvider", "from_stored", "to_row"]

MESSAGE_KEY = "agent_framework_message"
_ROLES = {"user": Role.USER, "system": Role.SYSTEM, "assistant": Role.ASSISTANT}


# -- conversion (pure) -----------------------------------------------------------------------


def _arguments(value: Any) -> str:
    if value is None or isinstance(value, str):
        return value or ""
    return json.dumps(value, ensure_ascii=False)


def to_row(message: Message) -> dict[str, Any]:
    """The memstrata message fields for an Agent Framework message (which rides along)."""
    contents: list[Any] = list(message.contents)
    calls = [
        {"id": c.call_id, "function": {"name": c.name, "arguments": _arguments(c.arguments)}}
        for c in contents
        if c.type == "function_call" and c.call_id and c.name
    ]
    results = [c.call_id for c in contents if c.type == "function_result" and c.call_id]
    text = message.text or ""
    row: dict[str, Any]
    if str(message.role) == "tool" and results:
        row = {"role": Role.TOOL, "tool_call_id": results[0], "content": text}
        if not text:
            row["content"] = "\n".join(
                str(c.result) for c in contents if c.type == "function_result"
            )
    else:
        role = _ROLES.get(str(message.role), Role.ASSISTANT)
        row = {"role": role, "content": text}
        if calls and role is Role.ASSISTANT:
            row["tool_calls"] = calls
    if not row["content"] and not row.get("tool_calls"):
        row["content"] = f"[{message.role}]"
    return attach_native(MESSAGE_KEY, message.to_dict(), row)


def from_stored(message: StoredMessage) -> Message:
    """The Agent Framework message a stored message holds (or a text one of its role)."""
    native = native_of(MESSAGE_KEY, message)
    if native is not None:
        return Message.from_dict(native)
    return Message(role=message.role.value, contents=[message.content])


# -- providers -------------------------------------------------------------------------------


class MemstrataHistoryProvider(HistoryProvider):
    """An agent session's history in a memstrata conversation of ``scope``'s user."""

    def __init__(
        self,
        memory: MemoryLike,
        scope: Scope,
        *,
        source_id: str = "memstrata-history",
        **options: Any,
    ) -> None:
        super().__init__(source_id, **options)
        self._memory = as_async(memory)
        self.scope = scope

    def conversation_id(self, session_id: str | None) -> str:
        """The memstrata conversation of an agent session."""
        return session_conversation_id("agent-framework", self.scope, session_id or "default")

    async def get_messages(
        self, session_id: str | None, *, state: dict[str, Any] | None = None, **kwargs: Any
    ) -> list[Message]:
        try:
            branch = await self._memory.messages.path(self.scope, self.conversation_id(session_id))
        except NotFound:
            return []
        return [from_stored(m) for m in branch]

    async def save_messages(
        self,
        session_id: str | None,
        messages: Sequence[Message],
        *,
        state: dict[str, Any] | None = None,
        **kwargs: Any,
    ) -> None:
        rows = [to_row(m) for m in messages]
        cid = self.conversation_id(session_id)
        await append_rows(self._memory, self.scope, cid, rows, title=session_id)


class MemstrataContextProvider(ContextProvider):
    """Adds the user's memstrata memory to the instructions of every run."""

    def __init__(
        self,
        memory: MemoryLike,
        scope: Scope,
        *,
        source_id: str = "memstrata-memory",
        conversation_id: str | None = None,
        budget: int = 2000,
        k: int = 5,
    ) -> None:
        super().__init__(source_id)
        self._memory = as_async(memory)
        self.scope = scope
        self.conversation_id = conversation_id
        self.budget = budget
        self.k = k

    async def blocks(self, query: str | None) -> list[str]:
        """The memory blocks for ``query`` (what :meth:`before_run` adds)."""
        return await user_memory_blocks(
            self._memory, self.scope, self.conversation_id, query, budget=self.budget, k=self.k
        )

    async def before_run(
        self,
        *,
        agent: SupportsAgentRun,
        session: AgentSession,
        context: SessionContext,
        state: dict[str, Any],
    ) -> None:
        texts = [m.text for m in context.input_messages if str(m.role) == "user" and m.text]
        blocks = await self.blocks(texts[-1] if texts else None)
        if blocks:
            context.extend_instructions(self.source_id, "\n\n".join(blocks))
