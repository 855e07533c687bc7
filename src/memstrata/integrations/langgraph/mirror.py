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
import json
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

__all__ = ["message_rows", "mirror_messages"]

log = logging.getLogger(__name__)


def _digest(message: BaseMessage, fields: dict[str, Any]) -> str:
    text = json.dumps(fields, sort_keys=True, default=str, ensure_ascii=False)
    return hashlib.sha256(f"{message.id or ''}\x1f{text}".encode()).hexdigest()


def message_rows(conversation_id: str, messages: Sequence[Any]) -> list[dict[str, Any]]:
    """The ``messages.put`` fields of each message, with chained ids (pure).

    A message memstrata cannot keep (say, an image block) is left out with a warning:
    the graph's own state still has it, and the checkpoint write must not fail for
    the sake of its mirror.
    """
    base = uuid.UUID(conversation_id)
    rows: list[dict[str, Any]] = []
    previous = ""
    for message in messages:
        if not isinstance(message, BaseMessage):
            continue
        try:
            fields = from_langchain(message)
        except InvalidInput as exc:
            log.warning("not mirrored into the conversation: %s", exc)
            continue
        if not fields["content"] and not fields.get("tool_calls"):
            continue  # an empty turn has nothing to show
        mid = str(uuid.uuid5(base, f"{previous}\x1f{_digest(message, fields)}"))
        rows.append({**fields, "id": mid})
        previous = mid
    return rows


def mirror_messages(scope: Scope, thread_id: str, messages: Sequence[Any]) -> Steps[None]:
    """Write the branch ``messages`` into the thread's conversation (see the module doc)."""
    conversation_id = conversation_id_for(scope, thread_id)
    rows = message_rows(conversation_id, messages)
    stored = len(rows)
    while stored > 0:
        try:
            yield call("messages.get", scope, conversation_id, rows[stored - 1]["id"])
            break
        except NotFound:
            stored -= 1
    if stored == len(rows):
        return
    if stored == 0:
        with contextlib.suppress(Conflict):  # made meanwhile by another writer
            yield call(
                "conversations.create",
                scope,
                id=conversation_id,
                title=f"LangGraph thread {thread_id}"[:200],
                metadata={"langgraph_thread_id": thread_id},
            )
    parent = rows[stored - 1]["id"] if stored else None
    for row in rows[stored:]:
        yield call("messages.put", scope, conversation_id, parent_id=parent, **row)
        parent = row["id"]
