"""An OpenAI Agents SDK session kept in a memstrata conversation branch.

:class:`MemstrataSession` implements the SDK's ``Session`` protocol (``get_items``,
``add_items``, ``pop_item``, ``clear_session``). Each session item becomes one message
on the branch, readable by the rest of memstrata (history, context, recall): a user or
assistant message as itself, a ``function_call`` as an assistant tool call, its
``function_call_output`` as a tool message, anything else (reasoning, hosted tool
calls) as an assistant message with its text. The item itself rides along in the
message's metadata, so what the SDK gets back is exactly what it stored.

``pop_item`` moves the branch's leaf back one message instead of deleting it: the
next ``add_items`` grows a new branch from there, which is how memstrata keeps an
edited or regenerated turn. Popping the first item leaves an empty session and drops
the conversation, as ``clear_session`` does.

Needs ``pip install 'memstrata[openai-agents]'``.
"""

from __future__ import annotations

import asyncio
import contextlib
from typing import TYPE_CHECKING, Any, cast

from memstrata.errors import MissingDependency, NotFound
from memstrata.integrations._common import (
    MemoryLike,
    as_async,
    attach_native,
    ensure_conversation,
    json_safe,
    native_of,
    session_conversation_id,
)
from memstrata.types import Message, Role, Scope

try:
    from agents.memory import SessionSettings
    from agents.memory.session_settings import resolve_session_limit
except ImportError:
    raise MissingDependency(
        "the OpenAI Agents integration needs openai-agents: pip install 'memstrata[openai-agents]'"
    ) from None

if TYPE_CHECKING:
    from agents.items import TResponseInputItem

__all__ = ["MemstrataSession", "item_to_message", "message_to_item"]

ITEM_KEY = "openai_agents_item"
_ROLES = {"user": Role.USER, "assistant": Role.ASSISTANT, "system": Role.SYSTEM}


# -- conversion (pure) -----------------------------------------------------------------------


def _text(value: Any) -> str:
    """The readable text of an item's content or output (a string or a list of parts)."""
    if isinstance(value, str):
        return value
    if not isinstance(value, list):
        return ""
    parts = []
    for part in value:
        if isinstance(part, dict):
            text = part.get("text", part.get("refusal"))
            if isinstance(text, str):
                parts.append(text)
    return "\n".join(parts)


def item_to_message(item: dict[str, Any]) -> dict[str, Any]:
    """The memstrata message fields for one session item (``item`` is JSON data)."""
    kind = item.get("type")
    fields: dict[str, Any]
    if kind in ("function_call", "custom_tool_call"):
        args = item.get("arguments", item.get("input", ""))
        call = {
            "id": str(item.get("call_id") or item.get("id")),
            "function": {"name": str(item.get("name")), "arguments": str(args)},
        }
        fields = {"role": Role.ASSISTANT, "content": "", "tool_calls": [call]}
    elif kind in ("function_call_output", "custom_tool_call_output"):
        fields = {
            "role": Role.TOOL,
            "content": _text(item.get("output")),
            "tool_call_id": str(item.get("call_id")),
        }
    elif kind in (None, "message") and item.get("role") in (*_ROLES, "developer"):
        fields = {
            "role": _ROLES.get(str(item["role"]), Role.SYSTEM),
            "content": _text(item.get("content")),
        }
    else:  # reasoning, hosted tools, compaction markers: the assistant's own steps
        text = _text(item.get("summary")) or _text(item.get("content"))
        fields = {"role": Role.ASSISTANT, "content": text}
    if not fields["content"] and not fields.get("tool_calls"):
        fields["content"] = f"[{kind or item.get('role') or 'item'}]"
    return attach_native(ITEM_KEY, item, fields)


def message_to_item(message: Message) -> dict[str, Any]:
    """The session item a stored message holds (one written by another client becomes
    an easy input message of its role)."""
    item = native_of(ITEM_KEY, message)
    if isinstance(item, dict):
        return item
    if message.role is Role.TOOL:
        return {
            "type": "function_call_output",
            "call_id": message.tool_call_id,
            "output": message.content,
        }
    if message.tool_calls:
        call = message.tool_calls[0]  # one call per item; this message came from elsewhere
        return {
            "type": "function_call",
            "call_id": call.id,
            "name": call.function.name,
            "arguments": call.function.arguments,
        }
    return {"role": message.role.value, "content": message.content}


# -- the session -----------------------------------------------------------------------------


class MemstrataSession:
    """An OpenAI Agents SDK ``Session`` over the active branch of one conversation.

    ``session_id`` is any string; it maps to the same conversation of ``scope`` every
    time (pass ``conversation_id`` to use an existing conversation instead).
    ``memory`` is a :class:`~memstrata.Memory` or :class:`~memstrata.AsyncMemory`.
    """

    def __init__(
        self,
        session_id: str,
        memory: MemoryLike,
        scope: Scope,
        *,
        conversation_id: str | None = None,
        session_settings: SessionSettings | None = None,
    ) -> None:
        self.session_id = session_id
        self.session_settings = session_settings
        self.scope = scope
        self.conversation_id = conversation_id or session_conversation_id(
            "openai-agents", scope, session_id
        )
        self._memory = as_async(memory)
        # Pops and appends of one session object stay in order (read-then-move-leaf).
        self._lock = asyncio.Lock()

    async def _branch(self) -> list[Message]:
        try:
            return await self._memory.messages.path(self.scope, self.conversation_id)
        except NotFound:
            return []

    async def get_items(self, limit: int | None = None) -> list[TResponseInputItem]:
        """The session's items, oldest first; with ``limit``, the latest that many."""
        n = resolve_session_limit(limit, self.session_settings)
        if n == 0:
            return []
        branch = await self._branch()
        if n is not None and n > 0:
            branch = branch[-n:]
        return [cast("TResponseInputItem", message_to_item(m)) for m in branch]

    async def add_items(self, items: list[TResponseInputItem]) -> None:
        """Append the items, in order, at the end of the branch."""
        if not items:
            return
        rows = [item_to_message(json_safe(item)) for item in items]
        async with self._lock:
            await ensure_conversation(
                self._memory, self.scope, self.conversation_id, title=self.session_id
            )
            for row in rows:
                await self._memory.messages.append(self.scope, self.conversation_id, **row)

    async def pop_item(self) -> TResponseInputItem | None:
        """Take the newest item off the branch and return it (None when empty)."""
        async with self._lock:
            branch = await self._branch()
            if not branch:
                return None
            last = branch[-1]
            if last.parent_id is None:
                await self._drop()
            else:
                await self._memory.conversations.set_active_leaf(
                    self.scope, self.conversation_id, last.parent_id
                )
            return cast("TResponseInputItem", message_to_item(last))

    async def clear_session(self) -> None:
        """Forget every item of the session (its conversation is deleted)."""
        async with self._lock:
            await self._drop()

    async def _drop(self) -> None:
        with contextlib.suppress(NotFound):
            await self._memory.conversations.delete(self.scope, self.conversation_id)
