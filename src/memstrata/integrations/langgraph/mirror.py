"""A graph's ``messages`` state, kept as a memstrata conversation (sans-IO steps).

Each checkpoint of a thread's root namespace holds the whole message list. It is
written as one branch of the thread's conversation (:func:`conversation_id_for` of
the thread id): every message gets an id derived from its predecessor's and from its
own LangChain id, type and text, so the messages two checkpoints share are the same
memstrata messages, and a checkpoint forked from an earlier one (a replay, an
``update_state`` on an old checkpoint, an edited message) adds its new messages
under the last message it shares: a branch, as a regeneration would be.

Only what is missing is written: the steps look for the newest message already
stored (usually the last but one or two) and append the rest under it.
"""

from __future__ import annotations

import contextlib
import hashlib
import logging
import uuid
from collections.abc import Sequence
from typing import Any

from langchain_core.messages import BaseMessage

from memstrata.errors import Conflict, InvalidInput, NotFound
from memstrata.integrations.langchain import from_langchain
from memstrata.integrations.langgraph._steps import Steps, call
from memstrata.integrations.threads import conversation_id_for
from memstrata.types import Scope

__all__ = ["chained_ids", "mirror_messages"]

log = logging.getLogger(__name__)


def _identity(message: BaseMessage) -> str:
    """What makes a message the same message: its LangChain id, type and text."""
    text = message.content if isinstance(message.content, str) else repr(message.content)
    return f"{message.id or ''}\x1f{message.type}\x1f{text}"


def _as_uuid(raw: bytes) -> str:
    """16 hash bytes as a UUID string (version 8, "custom"): cheaper than ``uuid.uuid5``,
    which matters because every checkpoint walks the whole message list."""
    b = bytearray(raw)
    b[6] = (b[6] & 0x0F) | 0x80
    b[8] = (b[8] & 0x3F) | 0x80
    h = b.hex()
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


def chained_ids(conversation_id: str, messages: Sequence[Any]) -> list[tuple[str, BaseMessage]]:
    """Each LangChain message with its memstrata id, chained on its predecessor's (pure)."""
    previous = uuid.UUID(conversation_id).bytes
    out: list[tuple[str, BaseMessage]] = []
    for message in messages:
        if isinstance(message, BaseMessage):
            previous = hashlib.blake2b(
                previous + _identity(message).encode(), digest_size=16
            ).digest()
            out.append((_as_uuid(previous), message))
    return out


def _fields(message: BaseMessage) -> dict[str, Any] | None:
    """The ``messages.put`` fields, or None for a message the conversation leaves out.

    A message memstrata cannot keep (say, an image block) is left out with a warning:
    the graph's own state still has it, and the checkpoint write must not fail for the
    sake of its mirror. An empty turn has nothing to show.
    """
    try:
        fields = from_langchain(message)
    except InvalidInput as exc:
        log.warning("not mirrored into the conversation: %s", exc)
        return None
    if not fields["content"] and not fields.get("tool_calls"):
        return None
    return fields


def mirror_messages(scope: Scope, thread_id: str, messages: Sequence[Any]) -> Steps[None]:
    """Write the branch ``messages`` into the thread's conversation (see the module doc)."""
    conversation_id = conversation_id_for(scope, thread_id)
    rows = chained_ids(conversation_id, messages)
    # Only the newest messages are converted: the stored prefix is found by id alone.
    stored = len(rows)
    while stored > 0:
        mid, message = rows[stored - 1]
        if _fields(message) is not None:
            try:
                yield call(lambda m: m.messages.get, scope, conversation_id, mid)
                break
            except NotFound:
                pass
        stored -= 1
    if stored == len(rows):
        return
    if stored == 0:
        with contextlib.suppress(Conflict):  # made meanwhile by another writer
            yield call(
                lambda m: m.conversations.create,
                scope,
                id=conversation_id,
                title=f"LangGraph thread {thread_id}"[:200],
                metadata={"langgraph_thread_id": thread_id},
            )
    parent = rows[stored - 1][0] if stored else None
    for mid, message in rows[stored:]:
        fields = _fields(message)
        if fields is not None:
            yield call(
                lambda m: m.messages.put, scope, conversation_id, id=mid, parent_id=parent, **fields
            )
            parent = mid
