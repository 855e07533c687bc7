"""Graph checkpoints and their pending writes (sans-IO storage operations).

A checkpoint is keyed by scope, thread, namespace and checkpoint id; its parent is
the checkpoint it was resumed from, so a thread is a tree and a fork is a sibling.
Checkpoint ids sort in creation order (the framework makes them time-ordered), which
is what "latest" and ``before`` rely on. Pending writes belong to one checkpoint and
are keyed by task and index: a regular write (index >= 0) is kept as first written
(a retried task does not overwrite it), a special one (index < 0: error, interrupt,
...) is replaced, as the framework expects.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Literal

from memstrata.errors import InvalidInput
from memstrata.runtime import Runtime
from memstrata.sealing import seal_bytes, unseal_bytes
from memstrata.storage import tenancy
from memstrata.storage.plan import Exec, Op, Query, Row
from memstrata.storage.records import from_micros
from memstrata.storage.sql import decode_cursor, encode_cursor
from memstrata.types import Page, Scope

__all__ = [
    "GraphCheckpoint",
    "GraphWrite",
    "copy_thread",
    "delete_for_runs",
    "delete_for_user",
    "delete_thread",
    "get_checkpoint",
    "graph_row",
    "list_checkpoints",
    "prune",
    "put_checkpoint",
    "put_writes",
]

_MAX_NAME = 1024
_MAX_PAGE = 500


@dataclass(frozen=True, slots=True)
class GraphWrite:
    """One pending write of a task, as the framework serialised it."""

    task_id: str
    idx: int
    channel: str
    type: str
    value: bytes
    task_path: str = ""


@dataclass(frozen=True, slots=True)
class GraphCheckpoint:
    """One stored checkpoint with its pending writes (in task-path, task, index order)."""

    thread_id: str
    checkpoint_ns: str
    checkpoint_id: str
    parent_id: str | None
    run_id: str | None
    type: str
    checkpoint: bytes
    metadata_type: str
    metadata: bytes
    created_at: datetime
    writes: tuple[GraphWrite, ...] = ()


def _text(value: object, what: str, *, empty: bool = False) -> str:
    if not isinstance(value, str) or len(value) > _MAX_NAME or "\x00" in value:
        raise InvalidInput(f"{what} must be a string of at most {_MAX_NAME} characters", field=what)
    if not value and not empty:
        raise InvalidInput(f"{what} must not be empty", field=what)
    return value


def _owner(scope: Scope) -> tuple[str, str, str]:
    return (scope.tenant, scope.user, scope.agent_key)


_OWNER = "tenant_id = ? AND user_id = ? AND agent_id = ?"
_COLUMNS = (
    "thread_id, checkpoint_ns, checkpoint_id, parent_id, run_id, type, checkpoint, "
    "metadata_type, metadata, created_at"
)


def _blob(value: object) -> bytes:
    # PostgreSQL drivers may hand BYTEA back as a memoryview.
    return bytes(value) if not isinstance(value, bytes) else value  # type: ignore[call-overload]


def graph_row(scope: Scope, ns: str, checkpoint_id: str, *write: object) -> str:
    # Not the thread: copy_thread copies rows (same namespace and id) to another thread.
    return "/".join((scope.agent_key, ns, checkpoint_id, *map(str, write)))


def _seal(scope: Scope, column: str, row: str, data: bytes) -> bytes:
    """A serialised value as stored: sealed for its owner under encryption at rest."""
    return seal_bytes(column, row, scope.tenant, scope.user, data)


def _open(column: str, row: str, value: object) -> bytes | None:
    """A stored value; None once its owner's data key was destroyed."""
    return unseal_bytes(column, row, _blob(value))


def _checkpoint(scope: Scope, row: Row, writes: tuple[GraphWrite, ...]) -> GraphCheckpoint | None:
    """A checkpoint from a row of ``_COLUMNS`` (None once its owner's data key was
    destroyed: it reads as deleted)."""
    (
        thread_id,
        checkpoint_ns,
        checkpoint_id,
        parent_id,
        run_id,
        type_,
        checkpoint,
        metadata_type,
        metadata,
        created_at,
    ) = row
    at = graph_row(scope, checkpoint_ns, checkpoint_id)
    state = _open("graph_checkpoints.checkpoint", at, checkpoint)
    meta = _open("graph_checkpoints.metadata", at, metadata)
    if state is None or meta is None:
        return None
    return GraphCheckpoint(
        thread_id=thread_id,
        checkpoint_ns=checkpoint_ns,
        checkpoint_id=checkpoint_id,
        parent_id=parent_id,
        run_id=run_id,
        type=type_,
        checkpoint=state,
        metadata_type=metadata_type,
        metadata=meta,
        created_at=from_micros(created_at),
        writes=writes,
    )


# -- writing ---------------------------------------------------------------------------------


def put_checkpoint(
    rt: Runtime,
    scope: Scope,
    *,
    thread_id: str,
    checkpoint_ns: str,
    checkpoint_id: str,
    parent_id: str | None,
    run_id: str | None,
    type: str,
    checkpoint: bytes,
    metadata_type: str,
    metadata: bytes,
) -> Op[None]:
    """Store (or replace) one checkpoint; its pending writes are left as they are."""
    key = (
        *_owner(scope),
        _text(thread_id, "thread_id"),
        _text(checkpoint_ns, "checkpoint_ns", empty=True),
        _text(checkpoint_id, "checkpoint_id"),
    )
    if parent_id is not None:
        _text(parent_id, "parent_id")
    now = rt.clock()
    at = graph_row(scope, checkpoint_ns, checkpoint_id)
    yield from tenancy.ensure_user(scope.tenant, scope.user, now)
    yield Exec(
        "INSERT INTO graph_checkpoints (tenant_id, user_id, agent_id, thread_id, checkpoint_ns, "
        "checkpoint_id, parent_id, run_id, type, checkpoint, metadata_type, metadata, created_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, user_id, agent_id, "
        "thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET parent_id = excluded.parent_id, "
        "run_id = excluded.run_id, type = excluded.type, checkpoint = excluded.checkpoint, "
        "metadata_type = excluded.metadata_type, metadata = excluded.metadata",
        (
            *key,
            parent_id,
            run_id,
            type,
            _seal(scope, "graph_checkpoints.checkpoint", at, checkpoint),
            metadata_type,
            _seal(scope, "graph_checkpoints.metadata", at, metadata),
            now,
        ),
    )


def put_writes(
    scope: Scope,
    *,
    thread_id: str,
    checkpoint_ns: str,
    checkpoint_id: str,
    writes: Sequence[GraphWrite],
) -> Op[None]:
    """Store a task's pending writes on a checkpoint (see the module doc for replays)."""
    key = (
        *_owner(scope),
        _text(thread_id, "thread_id"),
        _text(checkpoint_ns, "checkpoint_ns", empty=True),
        _text(checkpoint_id, "checkpoint_id"),
    )
    columns = (
        "INSERT INTO graph_writes (tenant_id, user_id, agent_id, thread_id, checkpoint_ns, "
        "checkpoint_id, task_id, idx, task_path, channel, type, value) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, user_id, agent_id, "
        "thread_id, checkpoint_ns, checkpoint_id, task_id, idx) "
    )
    for w in writes:
        _text(w.task_id, "task_id")
        _text(w.channel, "channel")
        action = (
            "DO NOTHING"
            if w.idx >= 0
            else "DO UPDATE SET task_path = excluded.task_path, channel = excluded.channel, "
            "type = excluded.type, value = excluded.value"
        )
        yield Exec(
            columns + action,
            (
                *key,
                w.task_id,
                w.idx,
                w.task_path,
                w.channel,
                w.type,
                _seal(
                    scope,
                    "graph_writes.value",
                    graph_row(scope, checkpoint_ns, checkpoint_id, w.task_id, w.idx),
                    w.value,
                ),
            ),
        )


# -- reading ---------------------------------------------------------------------------------


def _writes_of(scope: Scope, rows: Sequence[Row]) -> Op[dict[tuple[str, str, str], list[Row]]]:
    """The pending writes of the given checkpoint rows, by (thread, namespace, id)."""
    found: dict[tuple[str, str, str], list[Row]] = {}
    if not rows:
        return found
    threads = sorted({r[0] for r in rows})
    ids = sorted({r[2] for r in rows})
    wanted = {(r[0], r[1], r[2]) for r in rows}
    got = yield Query(
        "SELECT thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, type, value, "
        f"task_path FROM graph_writes WHERE {_OWNER} "
        f"AND thread_id IN ({', '.join('?' * len(threads))}) "
        f"AND checkpoint_id IN ({', '.join('?' * len(ids))})",
        (*_owner(scope), *threads, *ids),
    )
    for r in got:
        k = (r[0], r[1], r[2])
        if k in wanted:
            found.setdefault(k, []).append(r)
    return found


def _with_writes(scope: Scope, rows: Sequence[Row]) -> Op[list[GraphCheckpoint]]:
    writes = yield from _writes_of(scope, rows)
    out: list[GraphCheckpoint] = []
    for row in rows:
        mine = sorted(writes.get((row[0], row[1], row[2]), []), key=lambda w: (w[8], w[3], w[4]))
        kept = []
        for w in mine:
            value = _open("graph_writes.value", graph_row(scope, w[1], w[2], w[3], w[4]), w[7])
            if value is not None:
                kept.append(GraphWrite(w[3], int(w[4]), w[5], w[6], value, w[8]))
        found = _checkpoint(scope, row, tuple(kept))
        if found is not None:
            out.append(found)
    return out


def get_checkpoint(
    scope: Scope, thread_id: str, checkpoint_ns: str = "", checkpoint_id: str | None = None
) -> Op[GraphCheckpoint | None]:
    """The checkpoint with that id, or the thread namespace's latest; None when there is none."""
    params: list[object] = [*_owner(scope), thread_id, checkpoint_ns]
    where = f"{_OWNER} AND thread_id = ? AND checkpoint_ns = ?"
    if checkpoint_id is not None:
        where += " AND checkpoint_id = ?"
        params.append(checkpoint_id)
    rows = yield Query(
        f"SELECT {_COLUMNS} FROM graph_checkpoints WHERE {where} "
        "ORDER BY checkpoint_id DESC LIMIT 1",
        params,
    )
    found = yield from _with_writes(scope, rows)
    return found[0] if found else None


def list_checkpoints(
    scope: Scope,
    *,
    thread_id: str | None = None,
    checkpoint_ns: str | None = None,
    checkpoint_id: str | None = None,
    before: str | None = None,
    limit: int = 100,
    cursor: str | None = None,
) -> Op[Page[GraphCheckpoint]]:
    """Checkpoints by thread, then namespace, then newest first.

    ``before`` keeps ids below it (older checkpoints); the cursor continues a listing.
    """
    if not 1 <= limit <= _MAX_PAGE:
        raise InvalidInput(f"limit must be 1-{_MAX_PAGE}", field="limit")
    where = [_OWNER]
    params: list[object] = list(_owner(scope))
    for column, value in (
        ("thread_id", thread_id),
        ("checkpoint_ns", checkpoint_ns),
        ("checkpoint_id", checkpoint_id),
    ):
        if value is not None:
            where.append(f"{column} = ?")
            params.append(value)
    if before is not None:
        where.append("checkpoint_id < ?")
        params.append(before)
    after = _decoded(cursor)
    if after is not None:
        t, ns, cid = after
        where.append(
            "(thread_id > ? OR (thread_id = ? AND checkpoint_ns > ?) "
            "OR (thread_id = ? AND checkpoint_ns = ? AND checkpoint_id < ?))"
        )
        params.extend((t, t, ns, t, ns, cid))
    rows = yield Query(
        f"SELECT {_COLUMNS} FROM graph_checkpoints WHERE {' AND '.join(where)} "
        "ORDER BY thread_id, checkpoint_ns, checkpoint_id DESC LIMIT ?",
        (*params, limit + 1),
    )
    items = yield from _with_writes(scope, rows[:limit])
    more = len(rows) > limit
    # From the last row read, not the last item: an unreadable row is skipped, not a stop.
    last = rows[limit - 1] if more else None
    next_cursor = encode_cursor(json.dumps(list(last[:3]))) if last is not None else None
    return Page(items, next_cursor)


def _decoded(cursor: str | None) -> tuple[str, str, str] | None:
    value = decode_cursor(cursor)
    if value is None:
        return None
    try:
        t, ns, cid = json.loads(value)
    except (ValueError, TypeError):
        raise InvalidInput("cursor is not one this server issued", field="cursor") from None
    return str(t), str(ns), str(cid)


# -- deleting and copying --------------------------------------------------------------------


def delete_thread(scope: Scope, thread_id: str) -> Op[None]:
    """Every checkpoint and pending write of the thread, in every namespace."""
    for table in ("graph_writes", "graph_checkpoints"):
        yield Exec(
            f"DELETE FROM {table} WHERE {_OWNER} AND thread_id = ?", (*_owner(scope), thread_id)
        )


def delete_for_runs(scope: Scope, run_ids: Sequence[str]) -> Op[None]:
    """The checkpoints made by the given runs, with their pending writes."""
    if not run_ids:
        return
    rows = yield Query(
        "SELECT thread_id, checkpoint_ns, checkpoint_id FROM graph_checkpoints "
        f"WHERE {_OWNER} AND run_id IN ({', '.join('?' * len(run_ids))})",
        (*_owner(scope), *run_ids),
    )
    yield from _delete_rows(scope, rows)


def _delete_rows(scope: Scope, rows: Sequence[Row]) -> Op[None]:
    for thread_id, ns, cid in rows:
        key = (*_owner(scope), thread_id, ns, cid)
        cond = f"{_OWNER} AND thread_id = ? AND checkpoint_ns = ? AND checkpoint_id = ?"
        yield Exec(f"DELETE FROM graph_writes WHERE {cond}", key)
        yield Exec(f"DELETE FROM graph_checkpoints WHERE {cond}", key)


def copy_thread(rt: Runtime, scope: Scope, source: str, target: str) -> Op[None]:
    """Copy every checkpoint and pending write of ``source`` to ``target`` (same ids)."""
    _text(target, "thread_id")
    if source == target:
        return
    yield from tenancy.ensure_user(scope.tenant, scope.user, rt.clock())
    cols = (
        "checkpoint_ns, checkpoint_id, parent_id, run_id, type, checkpoint, metadata_type, "
        "metadata, created_at"
    )
    yield Exec(
        f"INSERT INTO graph_checkpoints (tenant_id, user_id, agent_id, thread_id, {cols}) "
        f"SELECT tenant_id, user_id, agent_id, ?, {cols} FROM graph_checkpoints "
        f"WHERE {_OWNER} AND thread_id = ? ON CONFLICT DO NOTHING",
        (target, *_owner(scope), source),
    )
    wcols = "checkpoint_ns, checkpoint_id, task_id, idx, task_path, channel, type, value"
    yield Exec(
        f"INSERT INTO graph_writes (tenant_id, user_id, agent_id, thread_id, {wcols}) "
        f"SELECT tenant_id, user_id, agent_id, ?, {wcols} FROM graph_writes "
        f"WHERE {_OWNER} AND thread_id = ? ON CONFLICT DO NOTHING",
        (target, *_owner(scope), source),
    )


def prune(
    scope: Scope, thread_ids: Sequence[str], strategy: Literal["keep_latest", "delete"]
) -> Op[None]:
    """``keep_latest``: only each namespace's newest checkpoint stays; ``delete``: none."""
    if strategy not in ("keep_latest", "delete"):
        raise InvalidInput("strategy must be 'keep_latest' or 'delete'", field="strategy")
    for thread_id in thread_ids:
        if strategy == "delete":
            yield from delete_thread(scope, thread_id)
            continue
        rows = yield Query(
            "SELECT thread_id, checkpoint_ns, checkpoint_id FROM graph_checkpoints "
            f"WHERE {_OWNER} AND thread_id = ? ORDER BY checkpoint_ns, checkpoint_id DESC",
            (*_owner(scope), thread_id),
        )
        seen: set[str] = set()
        doomed: list[Row] = []
        for row in rows:
            if row[1] in seen:
                doomed.append(row)
            seen.add(row[1])
        yield from _delete_rows(scope, doomed)


def delete_for_user(tenant: str, user: str) -> Op[None]:
    """Cascade step: a deleted user's graph checkpoints go with them."""
    for table in ("graph_writes", "graph_checkpoints"):
        yield Exec(f"DELETE FROM {table} WHERE tenant_id = ? AND user_id = ?", (tenant, user))
