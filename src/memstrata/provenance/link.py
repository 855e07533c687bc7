"""Linking a reply to the recorded context it answered (sans-IO).

The client appends its assistant message with ``context_id``; the append and the link
are one transaction, so an invalid link stores no message. The rules:

* the record must be this scope's and this conversation's, else NotFound (404, as an
  unknown id: another scope's record is never told apart from a missing one);
* only an assistant message is a reply (InvalidInput, 422, otherwise);
* linking the same reply to the same record again is a no-op (a retried append);
* a record already linked to another reply, or a reply already linked to another
  record, is a Conflict (409).
"""

from __future__ import annotations

from memstrata.conversation.messages import append_message
from memstrata.errors import Conflict, InvalidInput, NotFound
from memstrata.ids import parse_id
from memstrata.runtime import Runtime
from memstrata.storage.plan import Exec, Op, Query
from memstrata.types import Message, NewMessage, Role, Scope

__all__ = ["append_linked", "link_reply"]

_OWNER = "tenant_id = ? AND user_id = ? AND agent_id = ?"


def _record_id(context_id: str) -> str:
    try:
        return parse_id(context_id, field="context_id")
    except InvalidInput:
        # A malformed id names no record: the same answer as an unknown one.
        raise NotFound(f"context record {context_id} not found", kind="context") from None


def link_reply(
    rt: Runtime, scope: Scope, conversation_id: str, message: Message, context_id: str
) -> Op[None]:
    """Link ``message`` (stored, in ``conversation_id``) to the record ``context_id``."""
    rid = _record_id(context_id)
    rows = yield Query(
        f"SELECT reply_id FROM context_records WHERE id = ? AND conversation_id = ? AND {_OWNER}",
        (rid, conversation_id, scope.tenant, scope.user, scope.agent_key),
        lock="update",
    )
    if not rows:
        raise NotFound(f"context record {context_id} not found", kind="context")
    if message.role is not Role.ASSISTANT:
        raise InvalidInput(
            "only an assistant message can be linked to a context record", field="context_id"
        )
    linked = rows[0][0]
    if linked == message.id:
        return
    if linked is not None:
        raise Conflict(f"context record {context_id} is linked to another reply")
    other = yield Query(
        "SELECT id FROM context_records WHERE conversation_id = ? AND reply_id = ?",
        (conversation_id, message.id),
    )
    if other:
        raise Conflict(f"message {message.id} is linked to another context record")
    n = yield Exec(
        "UPDATE context_records SET reply_id = ?, linked_at = ? WHERE id = ? AND reply_id IS NULL",
        (message.id, rt.clock(), rid),
    )
    if not n:  # a concurrent link won the record
        raise Conflict(f"context record {context_id} is linked to another reply")


def append_linked(
    rt: Runtime, scope: Scope, conversation_id: str, new: NewMessage, context_id: str | None
) -> Op[tuple[Message, bool]]:
    """Append a message and, with ``context_id``, link it to that record (one transaction:
    an invalid link stores nothing)."""
    if context_id is not None and new.role is not Role.ASSISTANT:
        raise InvalidInput(
            "only an assistant message can be linked to a context record", field="context_id"
        )
    message, created = yield from append_message(rt, scope, conversation_id, new)
    if context_id is not None:
        yield from link_reply(rt, scope, conversation_id, message, context_id)
    return message, created
