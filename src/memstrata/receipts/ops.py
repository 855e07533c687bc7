"""Deletions with a receipt (sans-IO): each runs the existing deletion, counting the rows its
DELETE statements removed per table (:func:`memstrata.storage.cascade.counted`), and writes
the receipt in the same transaction, so a receipt exists exactly when the deletion committed.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

from memstrata.conversation import conversations as conversation_ops
from memstrata.conversation import messages as message_ops
from memstrata.conversation import splice as splice_ops
from memstrata.conversation import users as user_ops
from memstrata.domain.receipts import Receipt
from memstrata.errors import NotFound
from memstrata.longterm import store as fact_store
from memstrata.nodes.ops import PURGE_JOB
from memstrata.runtime import Runtime
from memstrata.storage import tenancy
from memstrata.storage.cascade import counted
from memstrata.storage.plan import Exec, Op, Query
from memstrata.storage.records import from_micros
from memstrata.types import Scope

__all__ = [
    "Deletion",
    "delete_conversation",
    "delete_fact",
    "delete_message",
    "delete_user",
    "drop_purge_jobs",
    "get",
    "mark_key_destroyed",
    "owner_size",
    "pending",
    "set_verification",
    "store_size",
]

_COLUMNS = (
    "id, tenant_id, user_id, agent_id, kind, subject_ids, actor, tables, blobs, created_at, "
    "verified, verified_at, findings, key_destroyed"
)

# The subtree a message delete removes (as conversation.messages reads it), for the receipt.
_SUBTREE = (
    "WITH RECURSIVE sub(id) AS ("
    " SELECT id FROM messages WHERE id = ? AND conversation_id = ?"
    " UNION ALL SELECT m.id FROM messages m JOIN sub ON m.parent_id = sub.id"
    " AND m.conversation_id = ?"
    ") SELECT id FROM sub"
)

#: A deletion's outcome: what the deletion returned, its receipt, and the blob prefixes
#: that became unreachable with it (purged and scanned once it has committed).
Deletion = tuple[Any, Receipt, list[str]]


def _to_receipt(row: tuple[Any, ...]) -> Receipt:
    (rid, tenant, user, agent, kind, subjects, actor, tables, blobs, created, ok, at, found) = row[
        :13
    ]
    return Receipt(
        id=str(rid),
        tenant=str(tenant),
        user=str(user),
        agent=str(agent) or None,
        kind=str(kind),
        subject_ids=list(json.loads(subjects)),
        actor=str(actor),
        created_at=from_micros(int(created)),
        tables=dict(json.loads(tables)),
        blobs=dict(json.loads(blobs)),
        verified=None if ok is None else bool(ok),
        verified_at=None if at is None else from_micros(int(at)),
        findings=list(json.loads(found)) if found else [],
        key_destroyed=bool(row[13]),
    )


def _record(
    rt: Runtime,
    rid: str,
    scope: Scope,
    kind: str,
    subjects: Sequence[str],
    actor: str,
    tables: dict[str, int],
    *,
    owner_visible: bool = True,
) -> Op[Receipt]:
    now = rt.clock()
    counts = dict(sorted(tables.items()))
    yield Exec(
        "INSERT INTO deletion_receipts (id, tenant_id, user_id, agent_id, kind, subject_ids, "
        "actor, tables, blobs, created_at, owner_visible) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            rid,
            scope.tenant,
            scope.user,
            scope.agent or "",
            kind,
            json.dumps(list(subjects)),
            actor,
            json.dumps(counts),
            "{}",
            now,
            int(owner_visible),
        ),
    )
    return Receipt(
        rid, scope.tenant, scope.user, scope.agent, kind, list(subjects), actor,
        from_micros(now), counts, {},
    )  # fmt: skip


def delete_user(rt: Runtime, tenant: str, user: str, rid: str, actor: str) -> Op[Deletion]:
    """Delete a user (as :func:`memstrata.conversation.users.delete_user`) with a receipt.

    The user's earlier receipts stay, readable by the tenant's admins only from now on: a
    user re-created under the same name is someone else.
    """
    # The user's row exclusively before any read (see tenancy.ensure_user).
    if not (yield from tenancy.lock_user(tenant, user)):
        raise NotFound(f"user {user} not found", kind="user")
    rows = yield Query(
        "SELECT id FROM conversations WHERE tenant_id = ? AND user_id = ? ORDER BY seq",
        (tenant, user),
    )
    cids = [str(r[0]) for r in rows]
    prefixes = yield from rt.cascade.conversation_blobs(cids)
    n, tables = yield from counted(user_ops.delete_user(rt, tenant, user))
    yield Exec(
        "UPDATE deletion_receipts SET owner_visible = 0 WHERE tenant_id = ? AND user_id = ?",
        (tenant, user),
    )
    receipt = yield from _record(
        rt, rid, Scope(tenant, user), "user", [user, *cids], actor, tables, owner_visible=False
    )
    return n, receipt, prefixes


def mark_key_destroyed(rid: str) -> Op[None]:
    """Note on a user deletion's receipt that the user's data key was destroyed (after the
    deletion committed: a key is destroyed only once nothing can roll back)."""
    yield Exec("UPDATE deletion_receipts SET key_destroyed = 1 WHERE id = ?", (rid,))


def delete_conversation(
    rt: Runtime, scope: Scope, conversation_id: str, rid: str, actor: str
) -> Op[Deletion]:
    # Exclusive first, as the deletion itself does: the blob prefixes read next are final.
    yield from conversation_ops.hold_conversation(scope, conversation_id, exclusive=True)
    prefixes = yield from rt.cascade.conversation_blobs([conversation_id])
    _, tables = yield from counted(conversation_ops.delete_conversation(rt, scope, conversation_id))
    receipt = yield from _record(rt, rid, scope, "conversation", [conversation_id], actor, tables)
    return None, receipt, prefixes


def delete_message(
    rt: Runtime,
    scope: Scope,
    conversation_id: str,
    message_id: str,
    rid: str,
    actor: str,
    *,
    splice: bool = False,
) -> Op[Deletion]:
    """The message with its subtree, or (``splice``) the message alone, its children
    re-attached to its parent."""
    yield from conversation_ops.hold_conversation(scope, conversation_id, exclusive=True)
    if splice:
        _, tables = yield from counted(
            splice_ops.splice_message(rt, scope, conversation_id, message_id)
        )
        receipt = yield from _record(
            rt, rid, scope, "message", [conversation_id, message_id], actor, tables
        )
        return None, receipt, []
    rows = yield Query(_SUBTREE, (message_id, conversation_id, conversation_id))
    ids = [str(r[0]) for r in rows]
    _, tables = yield from counted(
        message_ops.delete_message(rt, scope, conversation_id, message_id)
    )
    receipt = yield from _record(rt, rid, scope, "message", [conversation_id, *ids], actor, tables)
    return None, receipt, []


def delete_fact(rt: Runtime, scope: Scope, fact_id: str, rid: str, actor: str) -> Op[Deletion]:
    _, tables = yield from counted(fact_store.delete_fact(rt, scope, fact_id))
    receipt = yield from _record(rt, rid, scope, "fact", [fact_id], actor, tables)
    return None, receipt, []


def get(
    tenant: str, user: str | None, rid: str, *, admin: bool = False, agent: str | None = None
) -> Op[Receipt]:
    """A receipt of ``tenant``: any of them for its admins (``user`` None), else one of the
    user's own deletions while the user exists (``admin``: the user's, deleted or not).
    Agents are kept apart as everywhere else: a scope reads the deletions made in that
    scope only (the user's own, without an agent, or one agent's); an admin naming a user
    and no agent reads all of the user's. NotFound otherwise, whoever holds it."""
    if not rid or len(rid) > 128 or "\x00" in rid:  # no receipt has such an id
        raise NotFound(f"receipt {rid!r} not found", kind="receipt")
    sql = f"SELECT {_COLUMNS} FROM deletion_receipts WHERE id = ? AND tenant_id = ?"
    params: tuple[str, ...] = (rid, tenant)
    if user is not None:
        sql += " AND user_id = ?" if admin else " AND user_id = ? AND owner_visible = 1"
        params += (user,)
        if not admin or agent is not None:
            sql += " AND agent_id = ?"
            params += (agent or "",)
    rows = yield Query(sql, params)
    if not rows:
        raise NotFound(f"receipt {rid} not found", kind="receipt")
    return _to_receipt(rows[0])


def set_verification(
    receipt: Receipt,
    blobs: dict[str, int],
    more_rows: dict[str, int],
    verified: bool | None,
    findings: Sequence[str],
    now: int,
) -> Op[Receipt]:
    """Store the blob counts, rows removed after the deletion's transaction (its purge jobs)
    and the scan's result on the receipt (``verified`` None: the scan is still to run)."""
    tables = dict(receipt.tables)
    for table, n in more_rows.items():
        if n:
            tables[table] = tables.get(table, 0) + n
    rid = receipt.id
    yield Exec(
        "UPDATE deletion_receipts SET tables = ?, blobs = ?, verified = ?, verified_at = ?, "
        "findings = ? WHERE id = ?",
        (
            json.dumps(dict(sorted(tables.items()))),
            json.dumps(dict(sorted(blobs.items()))),
            None if verified is None else int(verified),
            None if verified is None else now,
            json.dumps(list(findings)),
            rid,
        ),
    )
    rows = yield Query(f"SELECT {_COLUMNS} FROM deletion_receipts WHERE id = ?", (rid,))
    if not rows:  # removed by retention in between: nothing to report on
        raise NotFound(f"receipt {rid} not found", kind="receipt")
    return _to_receipt(rows[0])


def store_size() -> Op[int]:
    """About how many messages the store has held (the newest server order: one index
    read), which decides whether a verification scan runs inline or as a job."""
    rows = yield Query("SELECT max(seq) FROM messages")
    return int(rows[0][0] or 0)


def owner_size(tenant: str, user: str, cap: int) -> Op[int]:
    """How many messages ``user`` holds, counted up to ``cap`` + 1 (bounded work): an
    owner-scoped verification scan reads about that many rows."""
    rows = yield Query(
        "SELECT count(*) FROM (SELECT 1 FROM messages m JOIN conversations c "
        "ON c.id = m.conversation_id WHERE c.tenant_id = ? AND c.user_id = ? LIMIT ?) x",
        (tenant, user, cap + 1),
    )
    return int(rows[0][0])


def pending(tenant: str, limit: int) -> Op[list[Receipt]]:
    """The tenant's receipts whose verification has not run yet, oldest first."""
    rows = yield Query(
        f"SELECT {_COLUMNS} FROM deletion_receipts WHERE tenant_id = ? AND verified IS NULL "
        "ORDER BY created_at, id LIMIT ?",
        (tenant, limit),
    )
    return [_to_receipt(r) for r in rows]


def drop_purge_jobs(prefixes: Sequence[str]) -> Op[int]:
    """Remove the purge jobs a deletion queued for ``prefixes`` once the receipt has purged
    them itself: their payload names the deleted conversation, and they have nothing left
    to do. Returns the rows removed."""
    n = 0
    for prefix in prefixes:
        escaped = prefix.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        n += yield Exec(
            "DELETE FROM jobs WHERE kind = ? AND payload LIKE ? ESCAPE '\\'",
            (PURGE_JOB, f"%{escaped}%"),
        )
    return int(n)
