"""Reading provenance (sans-IO): what a reply's prompt held, and which replies held a fact."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from memstrata.conversation.conversations import get_conversation
from memstrata.conversation.lookup import require_message
from memstrata.domain.provenance import ContextRecord, FactUse, Provenance, RecordItem
from memstrata.errors import NotFound
from memstrata.provenance.record import open_report
from memstrata.runtime import Runtime, page_limit
from memstrata.storage.plan import Op, Query, Row
from memstrata.storage.records import from_micros
from memstrata.storage.sql import encode_cursor, placeholders, seq_cursor
from memstrata.types import Page, Scope

__all__ = ["fact_usage", "get_record", "reply_provenance"]

_OWNER = "r.tenant_id = ? AND r.user_id = ? AND r.agent_id = ?"
_RECORD = (
    "r.id, r.conversation_id, r.leaf_id, r.budget, r.report, r.reply_id, r.created_at, r.linked_at"
)


def _owner(scope: Scope) -> tuple[str, str, str]:
    return (scope.tenant, scope.user, scope.agent_key)


def _fact_states(scope: Scope, ids: Sequence[str]) -> Op[dict[str, tuple[str, int]]]:
    """Each fact of ``ids`` still stored in ``scope``: its status and updated_at."""
    if not ids:
        return {}
    rows = yield Query(
        f"SELECT id, status, updated_at FROM facts WHERE id IN ({placeholders(len(ids))}) "
        "AND tenant_id = ? AND user_id = ? AND agent_id = ?",
        (*ids, *_owner(scope)),
    )
    return {r[0]: (r[1], int(r[2])) for r in rows}


def _message_keys(items: Sequence[Row]) -> Op[set[tuple[str, str]]]:
    """(conversation, message) pairs among the message items that are still stored."""
    pairs = sorted({(r[4], r[3]) for r in items if r[2] == "message"})
    found: set[tuple[str, str]] = set()
    for cid in sorted({c for c, _ in pairs}):
        mids = [m for c, m in pairs if c == cid]
        rows = yield Query(
            f"SELECT id FROM messages WHERE conversation_id = ? AND id IN ({placeholders(len(mids))})",
            (cid, *mids),
        )
        found.update((cid, r[0]) for r in rows)
    return found


def _state(row: Row, facts: dict[str, tuple[str, int]], messages: set[tuple[str, str]]) -> str:
    _, _tier, kind, item_id, cid, version, deleted = row
    if kind == "message":
        return "present" if not deleted and (cid, item_id) in messages else "deleted"
    if kind == "fact":
        if deleted or item_id not in facts:
            return "deleted"
        status, updated = facts[item_id]
        if status != "active":
            return str(status)
        return "changed" if version is not None and updated != version else "active"
    return "recorded"


def _items(scope: Scope, context_id: str) -> Op[tuple[RecordItem, ...]]:
    rows = yield Query(
        "SELECT position, tier, kind, item_id, conversation_id, version, deleted "
        "FROM context_record_items WHERE context_id = ? ORDER BY position",
        (context_id,),
    )
    facts = yield from _fact_states(scope, sorted({r[3] for r in rows if r[2] == "fact"}))
    messages = yield from _message_keys(rows)
    return tuple(
        RecordItem(
            tier=r[1],
            kind=r[2],
            id=r[3],
            conversation_id=r[4] or None,
            version=None if r[5] is None else int(r[5]),
            state=_state(r, facts, messages),
        )
        for r in rows
    )


def _record(scope: Scope, row: Row) -> Op[ContextRecord | None]:
    """A record from a row of ``_RECORD``; None once its owner's data key was destroyed."""
    text = open_report(row[0], row[4])
    if text is None:
        return None
    report: dict[str, Any] = json.loads(text)
    report.setdefault("leaf_id", row[2])  # stored as a column only
    items = yield from _items(scope, row[0])
    return ContextRecord(
        id=row[0],
        conversation_id=row[1],
        leaf_id=row[2],
        budget=int(row[3]),
        report=report,
        reply_id=row[5],
        created_at=from_micros(row[6]),
        linked_at=None if row[7] is None else from_micros(row[7]),
        items=items,
    )


def get_record(scope: Scope, conversation_id: str, context_id: str) -> Op[ContextRecord]:
    """A record of this scope's conversation (NotFound otherwise)."""
    yield from get_conversation(scope, conversation_id)
    rows = yield Query(
        f"SELECT {_RECORD} FROM context_records r WHERE r.id = ? AND r.conversation_id = ? "
        f"AND {_OWNER}",
        (context_id, conversation_id, *_owner(scope)),
    )
    record = (yield from _record(scope, rows[0])) if rows else None
    if record is None:
        raise NotFound(f"context record {context_id} not found", kind="context")
    return record


def reply_provenance(scope: Scope, conversation_id: str, message_id: str) -> Op[Provenance]:
    """What the model saw before the reply ``message_id``: its linked record, or None when
    none is linked (NotFound when the message is not this scope's)."""
    yield from get_conversation(scope, conversation_id)
    yield from require_message(conversation_id, message_id)
    rows = yield Query(
        f"SELECT {_RECORD} FROM context_records r WHERE r.conversation_id = ? AND r.reply_id = ? "
        f"AND {_OWNER}",
        (conversation_id, message_id, *_owner(scope)),
    )
    record = (yield from _record(scope, rows[0])) if rows else None
    return Provenance(conversation_id, message_id, record)


def fact_usage(
    rt: Runtime, scope: Scope, fact_id: str, *, limit: int | None = None, cursor: str | None = None
) -> Op[Page[FactUse]]:
    """The replies whose prompts held ``fact_id``, newest record first.

    NotFound when the fact is neither stored in ``scope`` nor named by one of its
    records (a deleted fact keeps its uses: its id is a tombstone in them)."""
    n = page_limit(rt, limit)
    before = seq_cursor(cursor)
    fact = yield Query(
        "SELECT 1 FROM facts WHERE id = ? AND tenant_id = ? AND user_id = ? AND agent_id = ?",
        (fact_id, *_owner(scope)),
    )
    rows = yield Query(
        "SELECT r.seq, r.conversation_id, r.reply_id, r.id, r.created_at, i.version "
        "FROM context_records r JOIN context_record_items i ON i.context_id = r.id "
        f"WHERE i.kind = 'fact' AND i.item_id = ? AND {_OWNER} AND r.reply_id IS NOT NULL "
        "AND r.seq < ? ORDER BY r.seq DESC LIMIT ?",
        (fact_id, *_owner(scope), before if before is not None else 2**62, n + 1),
    )
    if not fact and not rows and before is None:
        named = yield Query(
            "SELECT 1 FROM context_records r JOIN context_record_items i ON i.context_id = r.id "
            f"WHERE i.kind = 'fact' AND i.item_id = ? AND {_OWNER} LIMIT 1",
            (fact_id, *_owner(scope)),
        )
        if not named:
            raise NotFound(f"fact {fact_id} not found", kind="fact")
    items = [
        FactUse(r[1], r[2], r[3], from_micros(r[4]), None if r[5] is None else int(r[5]))
        for r in rows[:n]
    ]
    nxt = encode_cursor(int(rows[n - 1][0])) if len(rows) > n else None
    return Page(items, nxt)
