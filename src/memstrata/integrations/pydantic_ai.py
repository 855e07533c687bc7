"""Pydantic AI message history kept in memstrata, and memstrata's memory in each model call.

- :class:`MemstrataMessageHistory` stores an agent's ``ModelMessage`` list in one
  conversation and gives it back exactly (through Pydantic AI's own
  ``ModelMessagesTypeAdapter``): ``await history.load()`` before a run,
  ``await history.save(result.new_messages())`` after it.
- :func:`memory_processor` is a history processor (``Agent(history_processors=[...])``
  in Pydantic AI 1; :func:`memory_capability` wraps it for ``Agent(capabilities=[...])``)
  that puts memstrata's memory for the conversation (profile, facts, summary, recalled
  messages; see :meth:`memstrata.Memory.context`) in front of every model request as a
  system prompt part.

Each Pydantic AI message becomes one memstrata message per part that a chat history
shows (a system prompt, the user's prompt, each tool return; a model response is one
assistant message with its text and tool calls), so memstrata's history, context and
recall read the agent's conversation as their own.

Needs ``pip install 'memstrata[pydantic-ai]'``.
"""

from __future__ import annotations

import contextlib
import dataclasses
from collections.abc import Awaitable, Callable, Sequence
from typing import Any

from memstrata.errors import MissingDependency, NotFound
from memstrata.integrations._common import (
    MemoryLike,
    append_rows,
    as_async,
    attach_native,
    facts_block,
    memory_blocks,
    native_of,
    session_conversation_id,
)
from memstrata.types import Message, Role, Scope

try:
    from pydantic_ai.messages import (
        ModelMessage,
        ModelMessagesTypeAdapter,
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        TextPart,
        ToolCallPart,
        ToolReturnPart,
        UserPromptPart,
    )
except ImportError:
    raise MissingDependency(
        "the Pydantic AI integration needs pydantic-ai: pip install 'memstrata[pydantic-ai]'"
    ) from None

__all__ = [
    "MemstrataMessageHistory",
    "from_messages",
    "memory_capability",
    "memory_processor",
    "to_rows",
    "without_memory",
]

MESSAGE_KEY = "pydantic_ai_message"
# The second and later memstrata messages of one Pydantic AI message carry this instead.
PART_KEY = "pydantic_ai_part"
# Marks the system prompt part that carries memstrata's memory into a request.
MEMORY_REF = "memstrata-memory"


# -- conversion (pure) -----------------------------------------------------------------------


def _text(content: Any) -> str:
    if isinstance(content, str):
        return content
    if isinstance(content, Sequence):
        return "\n".join(c for c in content if isinstance(c, str))
    return ""


def _request_rows(message: ModelRequest) -> list[dict[str, Any]]:
    rows: list[dict[str, Any]] = []
    parts: list[Any] = list(message.parts)  # duck-typed across Pydantic AI versions
    for part in parts:
        kind = getattr(part, "part_kind", "")
        if kind == "system-prompt":
            rows.append({"role": Role.SYSTEM, "content": part.content})
        elif kind == "user-prompt":
            rows.append({"role": Role.USER, "content": _text(part.content) or "[user-prompt]"})
        elif kind in ("tool-return", "retry-prompt") and getattr(part, "tool_call_id", None):
            text = part.model_response_str() if kind == "tool-return" else part.model_response()
            rows.append(
                {
                    "role": Role.TOOL,
                    "content": text or f"[{kind}]",
                    "tool_call_id": part.tool_call_id,
                }
            )
        elif kind == "retry-prompt":
            rows.append({"role": Role.USER, "content": part.model_response()})
    if not rows:  # instructions only, or parts a chat history does not show
        rows.append({"role": Role.USER, "content": message.instructions or "[request]"})
    return rows


def _response_row(message: ModelResponse) -> dict[str, Any]:
    texts, calls = [], []
    parts: list[Any] = list(message.parts)  # duck-typed across Pydantic AI versions
    for part in parts:
        kind = getattr(part, "part_kind", "")
        if kind == "text":
            texts.append(part.content)
        elif kind == "tool-call":
            calls.append(
                {
                    "id": part.tool_call_id,
                    "function": {"name": part.tool_name, "arguments": part.args_as_json_str()},
                }
            )
    content = "\n".join(texts)
    if not content and not calls:
        content = "[" + ",".join(getattr(p, "part_kind", "part") for p in message.parts) + "]"
    return {"role": Role.ASSISTANT, "content": content, "tool_calls": calls}


def to_rows(message: ModelMessage) -> list[dict[str, Any]]:
    """The memstrata message fields for one Pydantic AI message, oldest first; the first
    carries the whole message (``ModelMessagesTypeAdapter`` JSON) in its metadata."""
    rows = _request_rows(message) if isinstance(message, ModelRequest) else [_response_row(message)]
    native = ModelMessagesTypeAdapter.dump_python([message], mode="json")[0]
    first = attach_native(MESSAGE_KEY, native, rows[0])
    return [first, *({**row, "metadata": {PART_KEY: True}} for row in rows[1:])]


def _foreign(message: Message) -> ModelMessage:
    """A message written by another client, as the Pydantic AI message of its role."""
    if message.role is Role.SYSTEM:
        return ModelRequest(parts=[SystemPromptPart(content=message.content)])
    if message.role is Role.USER:
        return ModelRequest(parts=[UserPromptPart(content=message.content)])
    if message.role is Role.TOOL:
        return ModelRequest(
            parts=[
                ToolReturnPart(
                    tool_name=str(message.metadata.get("name", "tool")),
                    content=message.content,
                    tool_call_id=message.tool_call_id or "",
                )
            ]
        )
    parts: list[Any] = [TextPart(content=message.content)] if message.content else []
    parts += [
        ToolCallPart(tool_name=c.function.name, args=c.function.arguments, tool_call_id=c.id)
        for c in message.tool_calls
    ]
    return ModelResponse(parts=parts)


def from_messages(messages: Sequence[Message]) -> list[ModelMessage]:
    """The Pydantic AI messages a stored branch holds, oldest first."""
    out: list[ModelMessage] = []
    for m in messages:
        if m.metadata.get(PART_KEY):
            continue
        native = native_of(MESSAGE_KEY, m)
        if native is None:
            out.append(_foreign(m))
        else:
            out.extend(ModelMessagesTypeAdapter.validate_python([native]))
    return out


# -- persistence -----------------------------------------------------------------------------


class MemstrataMessageHistory:
    """An agent's message history in one memstrata conversation (its active branch).

    ``session_id`` is any string, mapped to the same conversation of ``scope`` every
    time (pass ``conversation_id`` to use an existing conversation instead).
    """

    def __init__(
        self,
        memory: MemoryLike,
        scope: Scope,
        session_id: str,
        *,
        conversation_id: str | None = None,
    ) -> None:
        self.scope = scope
        self.session_id = session_id
        self.conversation_id = conversation_id or session_conversation_id(
            "pydantic-ai", scope, session_id
        )
        self._memory = as_async(memory)

    async def load(self, limit: int | None = None) -> list[ModelMessage]:
        """The stored messages, oldest first (with ``limit``, the latest that many)."""
        try:
            branch = await self._memory.messages.path(self.scope, self.conversation_id)
        except NotFound:
            return []
        messages = from_messages(branch)
        return messages if limit is None else messages[max(len(messages) - limit, 0) :]

    async def save(self, messages: Sequence[ModelMessage]) -> None:
        """Append ``messages`` (typically ``result.new_messages()``) to the history."""
        rows = [row for message in without_memory(messages) for row in to_rows(message)]
        await append_rows(
            self._memory, self.scope, self.conversation_id, rows, title=self.session_id
        )

    async def clear(self) -> None:
        """Forget the history (its conversation is deleted)."""
        with contextlib.suppress(NotFound):
            await self._memory.conversations.delete(self.scope, self.conversation_id)


# -- memory in each request ------------------------------------------------------------------


def without_memory(messages: Sequence[ModelMessage]) -> list[ModelMessage]:
    """``messages`` without the memory :func:`memory_processor` put in (so that a saved
    history never stores it, and each request gets it once, fresh)."""
    out: list[ModelMessage] = []
    for m in messages:
        if isinstance(m, ModelRequest) and any(_is_memory(p) for p in m.parts):
            m = dataclasses.replace(m, parts=[p for p in m.parts if not _is_memory(p)])
        out.append(m)
    return out


def _is_memory(part: Any) -> bool:
    return getattr(part, "dynamic_ref", None) == MEMORY_REF


def _last_prompt(messages: Sequence[ModelMessage]) -> str | None:
    for message in reversed(messages):
        if isinstance(message, ModelRequest):
            parts: list[Any] = list(message.parts)
            for part in reversed(parts):
                if getattr(part, "part_kind", "") == "user-prompt":
                    return _text(part.content) or None
    return None


def memory_processor(
    memory: MemoryLike,
    scope: Scope,
    conversation_id: str,
    *,
    budget: int = 2000,
) -> Callable[[list[ModelMessage]], Awaitable[list[ModelMessage]]]:
    """A history processor that adds memstrata's memory for ``conversation_id`` (found
    with the latest user prompt as the query) as a system prompt part of the first request.

    Pass the conversation of a :class:`MemstrataMessageHistory` as its
    ``conversation_id``; before the conversation exists, the user's facts alone are added.
    """
    amem = as_async(memory)

    async def blocks_for(query: str | None) -> list[str]:
        try:
            ctx = await amem.context(scope, conversation_id, budget=budget, query=query)
        except NotFound:  # a first run: the conversation is saved after it
            facts = (await amem.facts.list(scope, limit=50)).items
            return [facts_block(facts)] if facts else []
        return memory_blocks(ctx)

    async def add_memory(messages: list[ModelMessage]) -> list[ModelMessage]:
        messages = without_memory(messages)
        blocks = await blocks_for(_last_prompt(messages))
        if not blocks or not messages or not isinstance(messages[0], ModelRequest):
            return messages
        first = messages[0]
        part = SystemPromptPart(content="\n\n".join(blocks), dynamic_ref=MEMORY_REF)
        return [dataclasses.replace(first, parts=[part, *first.parts]), *messages[1:]]

    return add_memory


def memory_capability(
    memory: MemoryLike, scope: Scope, conversation_id: str, *, budget: int = 2000
) -> Any:
    """:func:`memory_processor` as a capability (``Agent(capabilities=[...])``, Pydantic
    AI 2 and later, where ``history_processors=`` is gone)."""
    from pydantic_ai.capabilities import ProcessHistory

    return ProcessHistory(memory_processor(memory, scope, conversation_id, budget=budget))
