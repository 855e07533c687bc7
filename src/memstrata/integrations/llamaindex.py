"""LlamaIndex memory blocks and a chat store on memstrata.

- :class:`MemstrataFactsBlock` and :class:`MemstrataRecallBlock` are memory blocks for
  ``llama_index.core.memory.Memory(memory_blocks=[...])``: the first gives the user's
  long-term facts, the second the user's past messages that memstrata's recall finds for
  the latest message (hybrid keyword and vector search). Messages that the short-term
  memory lets go of are kept by the recall block in a memstrata conversation, so they stay
  findable.
- :class:`MemstrataChatStore` is a ``BaseChatStore`` (``ChatMemoryBuffer(chat_store=...)``)
  whose keys map to memstrata conversations of one user; messages come back exactly.

Needs ``pip install 'memstrata[llamaindex]'``.
"""

from __future__ import annotations

import contextlib
from typing import Any

import anyio

from memstrata.api import AsyncMemory, Memory
from memstrata.errors import MissingDependency, NotFound
from memstrata.integrations._common import (
    MemoryLike,
    all_facts,
    append_rows,
    as_async,
    attach_native,
    facts_block,
    native_of,
    session_conversation_id,
)
from memstrata.types import Message, Role, Scope

try:
    from llama_index.core.base.llms.types import ChatMessage, MessageRole
    from llama_index.core.memory.memory import BaseMemoryBlock
    from llama_index.core.storage.chat_store.base import BaseChatStore
    from pydantic import ConfigDict, Field, PrivateAttr
except ImportError:
    raise MissingDependency(
        "the LlamaIndex integration needs llama-index-core: pip install 'memstrata[llamaindex]'"
    ) from None

__all__ = [
    "MemstrataChatStore",
    "MemstrataFactsBlock",
    "MemstrataRecallBlock",
    "from_message",
    "to_row",
]

MESSAGE_KEY = "llamaindex_message"
KEY_FIELD = "llamaindex_key"
_ROLES = {
    MessageRole.USER: Role.USER,
    MessageRole.SYSTEM: Role.SYSTEM,
    MessageRole.DEVELOPER: Role.SYSTEM,
}


# -- conversion (pure) -----------------------------------------------------------------------


def to_row(message: ChatMessage) -> dict[str, Any]:
    """The memstrata message fields for a LlamaIndex chat message (which rides along)."""
    text = message.content or ""
    call_id = message.additional_kwargs.get("tool_call_id")
    row: dict[str, Any]
    if message.role in (MessageRole.TOOL, MessageRole.FUNCTION) and call_id:
        row = {"role": Role.TOOL, "tool_call_id": str(call_id), "content": text}
    else:
        row = {"role": _ROLES.get(message.role, Role.ASSISTANT), "content": text}
    if not row["content"]:
        row["content"] = f"[{message.role.value}]"
    return attach_native(MESSAGE_KEY, message.model_dump(mode="json"), row)


def from_message(message: Message) -> ChatMessage:
    """The LlamaIndex chat message a stored message holds (or one of its role)."""
    native = native_of(MESSAGE_KEY, message)
    if native is not None:
        return ChatMessage.model_validate(native)
    role = {Role.USER: MessageRole.USER, Role.SYSTEM: MessageRole.SYSTEM}.get(
        message.role, MessageRole.TOOL if message.role is Role.TOOL else MessageRole.ASSISTANT
    )
    extra = {"tool_call_id": message.tool_call_id} if message.tool_call_id else {}
    return ChatMessage(role=role, content=message.content, additional_kwargs=extra)


# -- memory blocks ---------------------------------------------------------------------------


class _Block(BaseMemoryBlock[str]):
    model_config = ConfigDict(arbitrary_types_allowed=True)
    scope: Scope = Field(description="The memstrata user the block reads.")
    _memory: AsyncMemory = PrivateAttr()

    def __init__(self, memory: MemoryLike, **data: Any) -> None:
        super().__init__(**data)
        self._memory = as_async(memory)


class MemstrataFactsBlock(_Block):
    """The user's long-term facts (what memstrata extracted or was told), one per line."""

    name: str = "memstrata_facts"
    accept_short_term_memory: bool = False

    async def _aget(self, messages: list[ChatMessage] | None = None, **kwargs: Any) -> str:
        facts = await all_facts(self._memory, self.scope)
        return facts_block(facts) if facts else ""

    async def _aput(self, messages: list[ChatMessage]) -> None:
        """Facts come from memstrata's own extraction; nothing to take here."""


class MemstrataRecallBlock(_Block):
    """The user's past messages that recall finds for the latest message."""

    name: str = "memstrata_recall"
    k: int = 5
    session_id: str = Field(
        default="llamaindex-archive",
        description="Names the conversation that keeps messages let go of by short-term memory.",
    )

    async def _aget(self, messages: list[ChatMessage] | None = None, **kwargs: Any) -> str:
        query = next(
            (
                m.content
                for m in reversed(messages or [])
                if m.role is MessageRole.USER and m.content
            ),
            None,
        )
        if not query:
            return ""
        hits = await self._memory.recall.search(self.scope, query, k=self.k)
        lines = [f"{h.message.role.value}: {h.message.content}" for h in hits]
        return "\n".join(lines)

    async def _aput(self, messages: list[ChatMessage]) -> None:
        cid = session_conversation_id("llamaindex", self.scope, self.session_id)
        rows = [to_row(m) for m in messages]
        await append_rows(self._memory, self.scope, cid, rows, title=self.session_id)


# -- chat store ------------------------------------------------------------------------------


class MemstrataChatStore(BaseChatStore):
    """A LlamaIndex chat store whose keys are conversations of one memstrata user."""

    model_config = ConfigDict(arbitrary_types_allowed=True)
    scope: Scope
    _memory: Memory = PrivateAttr()

    def __init__(self, memory: MemoryLike, scope: Scope) -> None:
        super().__init__(scope=scope)
        self._memory = memory if isinstance(memory, Memory) else Memory(memory.core)

    @classmethod
    def class_name(cls) -> str:
        return "MemstrataChatStore"

    def _cid(self, key: str) -> str:
        return session_conversation_id("llamaindex", self.scope, key)

    def _branch(self, key: str) -> list[Message]:
        try:
            return self._memory.messages.path(self.scope, self._cid(key))
        except NotFound:
            return []

    def get_messages(self, key: str) -> list[ChatMessage]:
        return [from_message(m) for m in self._branch(key)]

    def add_message(self, key: str, message: ChatMessage) -> None:
        self._append(key, [message])

    def _append(self, key: str, messages: list[ChatMessage]) -> None:
        rows = [to_row(m) for m in messages]
        cid = self._cid(key)
        try:
            self._memory.conversations.get(self.scope, cid)
        except NotFound:
            self._memory.conversations.create(
                self.scope, id=cid, title=key, metadata={KEY_FIELD: key}
            )
        for row in rows:
            self._memory.messages.append(self.scope, cid, **row)

    def set_messages(self, key: str, messages: list[ChatMessage]) -> None:
        self.delete_messages(key)
        if messages:
            self._append(key, messages)

    def delete_messages(self, key: str) -> list[ChatMessage] | None:
        branch = self._branch(key)
        if not branch:
            return None
        with contextlib.suppress(NotFound):
            self._memory.conversations.delete(self.scope, self._cid(key))
        return [from_message(m) for m in branch]

    def delete_message(self, key: str, idx: int) -> ChatMessage | None:
        messages = self.get_messages(key)
        if not 0 <= idx < len(messages):
            return None
        removed = messages.pop(idx)
        self.set_messages(key, messages)  # the branch is rewritten without it
        return removed

    def delete_last_message(self, key: str) -> ChatMessage | None:
        branch = self._branch(key)
        if not branch:
            return None
        last = branch[-1]
        if last.parent_id is None:
            self.delete_messages(key)
        else:  # the leaf moves back; the message stays as an abandoned branch
            self._memory.conversations.set_active_leaf(self.scope, self._cid(key), last.parent_id)
        return from_message(last)

    def get_keys(self) -> list[str]:
        keys: list[str] = []
        cursor: str | None = None
        while True:
            page = self._memory.conversations.list(self.scope, limit=200, cursor=cursor)
            for conv in page.items:
                key = conv.metadata.get(KEY_FIELD)
                if isinstance(key, str) and conv.id == self._cid(key):
                    keys.append(key)
            cursor = page.next_cursor
            if cursor is None:
                return keys

    # The async forms run the sync ones on a worker thread (the store's I/O is blocking).
    async def aset_messages(self, key: str, messages: list[ChatMessage]) -> None:
        await anyio.to_thread.run_sync(self.set_messages, key, messages)

    async def aget_messages(self, key: str) -> list[ChatMessage]:
        return await anyio.to_thread.run_sync(self.get_messages, key)

    async def async_add_message(self, key: str, message: ChatMessage) -> None:
        await anyio.to_thread.run_sync(self.add_message, key, message)

    async def adelete_messages(self, key: str) -> list[ChatMessage] | None:
        return await anyio.to_thread.run_sync(self.delete_messages, key)

    async def adelete_message(self, key: str, idx: int) -> ChatMessage | None:
        return await anyio.to_thread.run_sync(self.delete_message, key, idx)

    async def adelete_last_message(self, key: str) -> ChatMessage | None:
        return await anyio.to_thread.run_sync(self.delete_last_message, key)

    async def aget_keys(self) -> list[str]:
        return await anyio.to_thread.run_sync(self.get_keys)
