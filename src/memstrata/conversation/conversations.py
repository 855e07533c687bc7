"""Conversation operations (sans-IO; see :mod:`memstrata.storage.plan`).

Every operation takes the caller's :class:`~memstrata.types.Scope` and checks
ownership through the conversation row, so a conversation (and so a message) from
another scope is indistinguishable from one that does not exist.
"""

from __future__ import annotations

import json
from typing import Any

from memstrata.conversation.lookup import require_message
from memstrata.errors import Conflict, InvalidInput, NotFound
from memstrata.ids import parse_id
from memstrata.runtime import Runtime, page_limit
from memstrata.storage import tenancy
from memstrata.storage.plan import Exec, Op, Query
from memstrata.storage.records import (
    CONVERSATION_COLUMNS,
    check_text,
    dump_json,
    seal_conversation_texts,
    to_conversation,
    to_message,
)
from memstrata.storage.sql import encode_cursor, seq_cursor
from memstrata.types import Conversation, Page, Scope

__all__ = [
    "check_metadata",
    "create_conversation",
    "delete_conversation",
    "get_conversation",
    "hold_conversation",
    "list_conversations",
    "update_conversation",
]

_OWNER = "tenant_id = ? AND user_id = ? AND agent_id = ?"


def _owner(scope: Scope) -> tuple[str, str, str]:
    return (scope.tenant, scope.user, scope.agent_key)


def check_metadata(rt: Runtime, metadata: dict[str, Any] | None) -> None:
    if metadata and len(json.dumps(metadata, default=str)) > rt.limits.max_metadata_bytes:
        raise InvalidInput(
            f"metadata is over the limit of {rt.limits.max_metadata_bytes} bytes", field="metadata"
        )


def create_conversation(
    rt: Runtime,
    scope: Scope,
    *,
    title: str | None = None,
    metadata: dict[str, Any] | None = None,
    conversation_id: str | None = None,
) -> Op[Conversation]:
    check_metadata(rt, metadata)
    if title is not None and len(title) > 1000:
        raise InvalidInput("title is over 1000 characters", field="title")
    check_text(title, "title")
    cid = parse_id(conversation_id, field="id") if conversation_id else rt.make_id()
    now = rt.clock()
    yield from tenancy.ensure_user(scope.tenant, scope.user, now)
    try:
        yield Exec(
            "INSERT INTO conversations (id, tenant_id, user_id, agent_id, title, metadata, "
            "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (
                cid,
                *_owner(scope),
                *seal_conversation_texts(scope.tenant, scope.user, cid, title, dump_json(metadata)),
                now,
                now,
            ),
        )
    except Conflict:
        raise Conflict(f"conversation {cid} already exists") from None
    return (yield from get_conversation(scope, cid))


def get_conversation(scope: Scope, conversation_id: str) -> Op[Conversation]:
    rows = yield Query(
        f"SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id = ? AND {_OWNER}",
        (conversation_id, *_owner(scope)),
    )
    if not rows:
        raise NotFound(f"conversation {conversation_id} not found", kind="conversation")
    return to_conversation(rows[0])


def hold_conversation(
    scope: Scope, conversation_id: str, *, exclusive: bool = False
) -> Op[Conversation]:
    """The conversation, its row locked until commit (on PostgreSQL; SQLite's
    BEGIN IMMEDIATE already serialises writers).

    Every write of rows under a conversation starts here, shared (``exclusive``
    for appends and completions, which queue on one conversation so they never
    race for its active leaf), and a delete takes the row exclusively first. So a
    write either commits before the delete reads (and is deleted with it) or waits
    and then finds no conversation (NotFound). A lock, not an UPDATE: a second
    update of a row this transaction already updated re-checks its foreign key,
    which would lock the user row after the conversation, against the lock order.

    Parent locks rather than foreign keys: ``working_memory`` marks a user-wide
    document with an empty conversation id, many derived tables name the
    conversation, and SQLite cannot add a key to a table in place; and rather than
    SERIALIZABLE, which would make every write in the store a retry candidate.
    Lock order: user, then conversation, then the rows under it.
    """
    rows = yield Query(
        f"SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id = ? AND {_OWNER}",
        (conversation_id, *_owner(scope)),
        lock="update" if exclusive else "share",
    )
    if not rows:
        raise NotFound(f"conversation {conversation_id} not found", kind="conversation")
    return to_conversation(rows[0])


def list_conversations(
    rt: Runtime, scope: Scope, *, limit: int | None = None, cursor: str | None = None
) -> Op[Page[Conversation]]:
    """Newest first."""
    n = page_limit(rt, limit)
    before = seq_cursor(cursor)
    rows = yield Query(
        f"SELECT {CONVERSATION_COLUMNS}, seq FROM conversations WHERE {_OWNER} AND seq < ? "
        "ORDER BY seq DESC LIMIT ?",
        (*_owner(scope), before if before is not None else 2**62, n + 1),
    )
    items = [to_conversation(r) for r in rows[:n]]
    nxt = encode_cursor(rows[n - 1][-1]) if len(rows) > n else None
    return Page(items, nxt)


def update_conversation(
    rt: Runtime,
    scope: Scope,
    conversation_id: str,
    *,
    title: str | None = None,
    metadata: dict[str, Any] | None = None,
    active_leaf_id: str | None = None,
) -> Op[Conversation]:
    """Change the title, the metadata and/or the active leaf, all in one transaction."""
    check_metadata(rt, metadata)
    check_text(title, "title")
    before = yield from get_conversation(scope, conversation_id)
    sets: list[str] = []
    params: list[Any] = []
    sealed_title, sealed_meta = seal_conversation_texts(
        before.tenant, before.user, conversation_id, title, dump_json(metadata)
    )
    if title is not None:
        sets.append("title = ?")
        params.append(sealed_title)
    if metadata is not None:
        sets.append("metadata = ?")
        params.append(sealed_meta)
    moved = False
    if active_leaf_id is not None:
        leaf = to_message((yield from require_message(conversation_id, active_leaf_id)))
        sets.append("active_leaf_id = ?")
        params.append(leaf.id)
        moved = leaf.id != before.active_leaf_id
    if sets:
        yield Exec(
            f"UPDATE conversations SET {', '.join(sets)}, updated_at = ? WHERE id = ?",
            (*params, rt.clock(), conversation_id),
        )
    if moved:  # facts judged against the active branch follow it
        for hook in rt.on_branch_change:
            yield from hook(scope, conversation_id)
    return (yield from get_conversation(scope, conversation_id))


def delete_conversation(rt: Runtime, scope: Scope, conversation_id: str) -> Op[None]:
    # Exclusive first: writes in flight under it finish (and are deleted), later ones
    # wait and then find it gone (see hold_conversation).
    yield from hold_conversation(scope, conversation_id, exclusive=True)
    yield from rt.cascade.delete_conversations([conversation_id])
