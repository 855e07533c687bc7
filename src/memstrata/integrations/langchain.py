"""A LangChain chat message history backed by one memstrata conversation branch.

LangChain sees a flat list of messages; memstrata keeps a tree in which
regenerations and edits are branches. :class:`MemstrataChatMessageHistory` shows
LangChain one branch (root to leaf) and appends along it, so whatever LangChain
writes stays a plain chain in memstrata, and a branch chosen through memstrata (a
regeneration, ``set_active_leaf``) is what LangChain reads next.

The conversion between the two message shapes is two pure functions,
:func:`to_langchain` and :func:`from_langchain`; the class only adds the I/O.

Needs ``pip install 'memstrata[langchain]'``; importing this module without it raises
:class:`~memstrata.errors.MissingDependency`.
"""

from __future__ import annotations

import contextlib
import json
import sys
import weakref
from collections.abc import Sequence
from types import FrameType
from typing import Any

import anyio.to_thread

from memstrata.api import AsyncMemory, Memory
from memstrata.errors import Conflict, InvalidInput, MissingDependency, NotFound
from memstrata.integrations.threads import conversation_id_for
from memstrata.types import Message, Role, Scope, Status

try:
    from langchain_core.chat_history import BaseChatMessageHistory
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        ChatMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
    )
    from langchain_core.messages.tool import invalid_tool_call, tool_call
except ImportError:
    raise MissingDependency(
        "the LangChain integration needs langchain-core: pip install 'memstrata[langchain]'"
    ) from None

__all__ = ["MemstrataChatMessageHistory", "from_langchain", "to_langchain"]

# Content blocks that carry no history text of their own: tool calls are stored as
# tool_calls, and a model's reasoning is not part of what a history replays.
_SKIPPED_BLOCKS = frozenset(
    {
        "tool_use",
        "tool_call",
        "tool_call_chunk",
        "function_call",
        "server_tool_call",
        "server_tool_call_chunk",
        "reasoning",
        "thinking",
        "redacted_thinking",
    }
)

_CHAT_ROLES = {
    "user": Role.USER,
    "human": Role.USER,
    "assistant": Role.ASSISTANT,
    "ai": Role.ASSISTANT,
    "system": Role.SYSTEM,
}


# -- conversion (pure) -----------------------------------------------------------------------


def to_langchain(message: Message) -> BaseMessage:
    """A stored memstrata message as the LangChain message of its role.

    The LangChain ``id`` is the memstrata message id; a ``name`` kept in the message's
    metadata becomes the LangChain ``name``. Tool-call arguments that are not a JSON
    object come back as ``invalid_tool_calls`` with the raw text.
    """
    name = message.metadata.get("name")
    extra: dict[str, Any] = {"id": message.id}
    if isinstance(name, str):
        extra["name"] = name
    if message.role is Role.USER:
        return HumanMessage(content=message.content, **extra)
    if message.role is Role.SYSTEM:
        return SystemMessage(content=message.content, **extra)
    if message.role is Role.TOOL:
        return ToolMessage(
            content=message.content, tool_call_id=message.tool_call_id or "", **extra
        )
    calls: list[Any] = []
    invalid: list[Any] = []
    for call in message.tool_calls:
        fn = call.function
        try:
            args = json.loads(fn.arguments) if fn.arguments else {}
        except ValueError:
            args = None
        if isinstance(args, dict):
            calls.append(tool_call(name=fn.name, args=args, id=call.id))
        else:
            invalid.append(
                invalid_tool_call(
                    name=fn.name,
                    args=fn.arguments,
                    id=call.id,
                    error="the arguments are not a JSON object",
                )
            )
    return AIMessage(content=message.content, tool_calls=calls, invalid_tool_calls=invalid, **extra)


def _text(content: str | list[str | dict[Any, Any]]) -> str:
    """The text of a LangChain message content; refuses what a text store would lose."""
    if isinstance(content, str):
        return content
    parts: list[str] = []
    for block in content:
        if isinstance(block, str):
            parts.append(block)
            continue
        kind = block.get("type")
        if kind == "text" and isinstance(block.get("text"), str):
            parts.append(block["text"])
        elif kind not in _SKIPPED_BLOCKS:
            raise InvalidInput(
                f"memstrata stores message text; a {kind!r} content block cannot be kept "
                "(store the file elsewhere and put a reference in the text)",
                field="content",
            )
    return "".join(parts)


def _tool_calls(message: AIMessage) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    for call in message.tool_calls:
        if not call.get("id"):
            raise InvalidInput(
                f"tool call {call['name']!r} has no id; memstrata needs one to link its result",
                field="tool_calls",
            )
        arguments = json.dumps(call["args"], ensure_ascii=False)
        out.append({"id": call["id"], "function": {"name": call["name"], "arguments": arguments}})
    for bad in message.invalid_tool_calls:
        # Kept with their raw text so the history shows what the model actually produced.
        if not bad.get("id") or not bad.get("name"):
            raise InvalidInput(
                "an invalid tool call without a name or id cannot be stored", field="tool_calls"
            )
        out.append(
            {"id": bad["id"], "function": {"name": bad["name"], "arguments": bad.get("args") or ""}}
        )
    return out


def from_langchain(message: BaseMessage) -> dict[str, Any]:
    """The fields of ``mem.messages.append`` for a LangChain message.

    Human, AI, system and tool messages (and ``ChatMessage`` with a user, assistant or
    system role) map to their memstrata roles; AI tool calls and a tool message's
    ``tool_call_id`` carry over. Anything memstrata cannot keep raises
    :class:`~memstrata.errors.InvalidInput` rather than being dropped quietly.
    """
    fields: dict[str, Any] = {"content": _text(message.content)}
    if isinstance(message, HumanMessage):
        fields["role"] = Role.USER
    elif isinstance(message, AIMessage):
        fields["role"] = Role.ASSISTANT
        calls = _tool_calls(message)
        if calls:
            fields["tool_calls"] = calls
    elif isinstance(message, SystemMessage):
        fields["role"] = Role.SYSTEM
    elif isinstance(message, ToolMessage):
        fields["role"] = Role.TOOL
        fields["tool_call_id"] = message.tool_call_id
    elif isinstance(message, ChatMessage) and message.role in _CHAT_ROLES:
        fields["role"] = _CHAT_ROLES[message.role]
    else:
        raise InvalidInput(
            f"a LangChain {type(message).__name__} has no memstrata role "
            "(use Human, AI, System or Tool messages)",
            field="role",
        )
    if message.name:
        fields["metadata"] = {"name": message.name}
    return fields


def _visible(path: list[Message]) -> list[BaseMessage]:
    # A pending reply is a placeholder for a stream still running: not history yet.
    return [to_langchain(m) for m in path if m.status is not Status.PENDING]


# The callbacks of RunnableWithMessageHistory that write the turn (their errors are logged).
_SWALLOWING_CALLBACKS = frozenset({"_exit_history", "_aexit_history"})

# Writes that failed, by store and conversation, until the next read raises them.
_FAILED_WRITES: weakref.WeakKeyDictionary[Memory, dict[str, Exception]] = (
    weakref.WeakKeyDictionary()
)


def _is_missing_conversation(exc: NotFound) -> bool:
    return exc.detail.get("kind") == "conversation"


# -- the history -----------------------------------------------------------------------------


class MemstrataChatMessageHistory(BaseChatMessageHistory):
    """LangChain's ``BaseChatMessageHistory`` over one branch of a memstrata conversation.

    ``conversation_id``: the conversation to use, or any session id: a UUID is the
    conversation's own id, any other string (``"user-42-chat"``) maps to a stable
    conversation of this scope (:func:`~memstrata.integrations.threads.conversation_id_for`;
    the id given is kept in :attr:`session_id`, the conversation's in
    :attr:`conversation_id`). A conversation that does not exist yet is created on the
    first write, which suits ``RunnableWithMessageHistory`` session ids. None creates a
    new conversation now (titled ``title``).

    Storage errors raise. ``RunnableWithMessageHistory`` writes the turn from an
    end-of-run callback whose errors LangChain only logs, so a write that failed there is
    raised again by the next read of this conversation through this class (the next
    turn), instead of leaving a silent gap.

    ``leaf_id``: None (default) follows the conversation's active leaf: reads show the
    active branch and writes append after it, so a regeneration or a
    ``set_active_leaf`` made through memstrata is what LangChain sees next. An id pins
    the history to the branch ending there; each write appends under it and moves the
    pin to the newest message, so the history keeps following its own branch.

    Pending messages (replies still streaming) are left out of :attr:`messages`;
    appending while the branch ends in one raises :class:`~memstrata.errors.Conflict`,
    as memstrata does.

    :meth:`clear` deletes the conversation and creates it again, empty, with the same
    id, title and metadata. It is destructive on purpose: LangChain's contract is that
    every message goes, and every reader must agree. memstrata has no empty branch (an
    active leaf is always a message), so a "new root" could only hide the old messages
    from this object while ``mem.history``, ``mem.context`` and recall kept serving them
    to the model. Deleting also runs memstrata's forgetting (recall index, facts that
    only this conversation supported). To keep an old exchange, start a new history
    with a new conversation instead of clearing.

    Async methods use ``async_memory`` when given (the same store, e.g.
    ``AsyncMemory(mem.core)``); otherwise they run the sync calls in a worker thread.
    """

    def __init__(
        self,
        memory: Memory,
        scope: Scope,
        conversation_id: str | None = None,
        *,
        leaf_id: str | None = None,
        async_memory: AsyncMemory | None = None,
        title: str | None = None,
    ) -> None:
        super().__init__()
        self._mem = memory
        self._amem = async_memory
        self.scope = scope
        self._title = title
        if conversation_id is None:
            conversation_id = memory.conversations.create(scope, title=title).id
        self.session_id: str = conversation_id
        self.conversation_id: str = conversation_id_for(scope, conversation_id)
        self.leaf_id: str | None = leaf_id

    def _raise_failed_write(self) -> None:
        failed = _FAILED_WRITES.get(self._mem, {}).pop(self.conversation_id, None)
        if failed is not None:
            raise failed

    def _remember_failure(self, exc: Exception, caller: FrameType | None) -> None:
        # Only a write from RunnableWithMessageHistory's end-of-run callback, whose errors
        # LangChain logs and drops; a direct caller already got the exception.
        if caller is None or caller.f_code.co_name not in _SWALLOWING_CALLBACKS:
            return
        # Kept per store, not per object: RunnableWithMessageHistory makes a new history
        # object for every turn, and the next turn's read is where this must surface.
        exc.add_note(f"an earlier write to conversation {self.conversation_id} failed")
        _FAILED_WRITES.setdefault(self._mem, {})[self.conversation_id] = exc

    # -- reading --

    @property
    def messages(self) -> list[BaseMessage]:
        """The branch from its root to the leaf, oldest first, as LangChain messages."""
        self._raise_failed_write()
        try:
            path = self._mem.messages.path(self.scope, self.conversation_id, self.leaf_id)
        except NotFound as exc:
            if self.leaf_id is None and _is_missing_conversation(exc):
                return []  # not created yet
            raise
        return _visible(path)

    @messages.setter
    def messages(self, value: Sequence[BaseMessage]) -> None:
        # LangChain declares ``messages`` a plain attribute; assigning replaces the history.
        rows = list(value)
        for message in rows:
            from_langchain(message)  # refuse bad input before clearing anything
        self.clear()
        self.add_messages(rows)

    async def aget_messages(self) -> list[BaseMessage]:
        self._raise_failed_write()
        if self._amem is None:
            return await super().aget_messages()
        try:
            path = await self._amem.messages.path(self.scope, self.conversation_id, self.leaf_id)
        except NotFound as exc:
            if self.leaf_id is None and _is_missing_conversation(exc):
                return []
            raise
        return _visible(path)

    # -- writing --

    def _first_parent(self) -> dict[str, Any]:
        # Left out, memstrata appends after the active leaf in the append's own transaction.
        return {} if self.leaf_id is None else {"parent_id": self.leaf_id}

    def add_messages(self, messages: Sequence[BaseMessage]) -> None:
        """Append the messages in order along the branch, as one chain."""
        try:
            self._add(messages)
        except Exception as exc:
            self._remember_failure(exc, sys._getframe(1))
            raise

    def _add(self, messages: Sequence[BaseMessage]) -> None:
        rows = [from_langchain(m) for m in messages]  # refuse bad input before writing
        if not rows:
            return
        append = self._mem.messages.append
        try:
            first = append(self.scope, self.conversation_id, **rows[0], **self._first_parent())
        except NotFound as exc:
            if not _is_missing_conversation(exc):
                raise
            self._create()
            first = append(self.scope, self.conversation_id, **rows[0], **self._first_parent())
        last = first.id
        for row in rows[1:]:
            # Chained by id: a concurrent writer cannot slip in between this call's messages.
            last = append(self.scope, self.conversation_id, **row, parent_id=last).id
        self._pin_if_pinned(last)

    def _pin_if_pinned(self, message_id: str) -> None:
        if self.leaf_id is not None:
            self.leaf_id = message_id

    def _create(self) -> None:
        # Conflict: created meanwhile by another writer (or the id is another scope's, which
        # the retried append then reports as not found).
        with contextlib.suppress(Conflict):
            self._mem.conversations.create(self.scope, title=self._title, id=self.conversation_id)

    async def aadd_messages(self, messages: Sequence[BaseMessage]) -> None:
        try:
            await self._aadd(messages)
        except Exception as exc:
            self._remember_failure(exc, sys._getframe(1))
            raise

    async def _aadd(self, messages: Sequence[BaseMessage]) -> None:
        if self._amem is None:
            await anyio.to_thread.run_sync(self._add, messages)
            return
        amem = self._amem
        rows = [from_langchain(m) for m in messages]
        if not rows:
            return
        try:
            first = await amem.messages.append(
                self.scope, self.conversation_id, **rows[0], **self._first_parent()
            )
        except NotFound as exc:
            if not _is_missing_conversation(exc):
                raise
            with contextlib.suppress(Conflict):
                await amem.conversations.create(
                    self.scope, title=self._title, id=self.conversation_id
                )
            first = await amem.messages.append(
                self.scope, self.conversation_id, **rows[0], **self._first_parent()
            )
        last = first.id
        for row in rows[1:]:
            last = (
                await amem.messages.append(self.scope, self.conversation_id, **row, parent_id=last)
            ).id
        self._pin_if_pinned(last)

    # -- clearing --

    def clear(self) -> None:
        """Delete every message: the conversation is recreated empty (see the class doc)."""
        try:
            conv = self._mem.conversations.get(self.scope, self.conversation_id)
        except NotFound:
            self.leaf_id = None
            return
        self._mem.conversations.delete(self.scope, self.conversation_id)
        self._mem.conversations.create(
            self.scope, title=conv.title, metadata=dict(conv.metadata), id=conv.id
        )
        self.leaf_id = None

    async def aclear(self) -> None:
        if self._amem is None:
            await super().aclear()
            return
        try:
            conv = await self._amem.conversations.get(self.scope, self.conversation_id)
        except NotFound:
            self.leaf_id = None
            return
        await self._amem.conversations.delete(self.scope, self.conversation_id)
        await self._amem.conversations.create(
            self.scope, title=conv.title, metadata=dict(conv.metadata), id=conv.id
        )
        self.leaf_id = None
