"""Suspended runs (sans-IO): checkpoints keyed ``name:run_id`` that expire, and the opaque
snapshot a UI keeps for one run of a conversation."""

from __future__ import annotations

import json
from typing import Any

from memstrata.conversation.conversations import get_conversation, hold_conversation
from memstrata.domain.state import Checkpoint, RunSnapshot
from memstrata.errors import Expired, InvalidInput, NotFound
from memstrata.runtime import Runtime
from memstrata.state.checks import check_name, dump, open_doc, seal_doc, sized
from memstrata.storage import tenancy
from memstrata.storage.plan import Exec, Op, Query
from memstrata.storage.records import from_micros
from memstrata.types import Scope

__all__ = [
    "EXPIRED_MESSAGE",
    "MAX_TTL_S",
    "Checkpoint",
    "RunSnapshot",
    "checkpoint_row",
    "delete_checkpoint",
    "get_snapshot",
    "load_checkpoint",
    "put_snapshot",
    "save_checkpoint",
    "snapshot_row",
]

EXPIRED_MESSAGE = "This action has expired and cannot be resumed. Please start a new turn."


_CP_KEY = "tenant_id = ? AND user_id = ? AND agent_id = ? AND name = ? AND run_id = ?"


MAX_TTL_S = 10 * 365 * 86_400


def checkpoint_row(scope: Scope, name: str, run_id: str) -> str:
    return f"{scope.agent_key}/{name}/{run_id}"


def snapshot_row(conversation_id: str, run_id: str) -> str:
    return f"{conversation_id}/{run_id}"


def save_checkpoint(
    rt: Runtime,
    scope: Scope,
    name: str,
    run_id: str,
    state: Any,
    *,
    ttl_s: float | None = None,
    conversation_id: str | None = None,
) -> Op[Checkpoint]:
    """Save (overwrite) a checkpoint; with ``ttl_s`` it expires that many seconds from now."""
    key = (
        scope.tenant,
        scope.user,
        scope.agent_key,
        check_name(name, "name"),
        check_name(run_id, "run_id"),
    )
    # A checkpoint lives at most ten years; anything longer (or not finite) is a mistake.
    if ttl_s is not None and not 0 < ttl_s <= MAX_TTL_S:
        raise InvalidInput(f"ttl_s must be > 0 and at most {MAX_TTL_S} (ten years)", field="ttl_s")
    text = seal_doc(
        "checkpoints.state", checkpoint_row(scope, name, run_id), scope, sized(dump(state), "state")
    )
    now = rt.clock()
    expires = None if ttl_s is None else now + int(ttl_s * 1_000_000)
    yield from tenancy.ensure_user(scope.tenant, scope.user, now)  # user before conversation
    if conversation_id is not None:
        yield from hold_conversation(scope, conversation_id)
    yield Exec(
        "INSERT INTO checkpoints (tenant_id, user_id, agent_id, name, run_id, conversation_id, "
        "state, expires_at, expired_at, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, NULL, ?, ?) "
        "ON CONFLICT (tenant_id, user_id, agent_id, name, run_id) DO UPDATE SET "
        "conversation_id = excluded.conversation_id, state = excluded.state, "
        "expires_at = excluded.expires_at, expired_at = NULL, updated_at = excluded.updated_at",
        (*key, conversation_id, text, expires, now, now),
    )
    return (yield from load_checkpoint(rt, scope, name, run_id))


def load_checkpoint(rt: Runtime, scope: Scope, name: str, run_id: str) -> Op[Checkpoint]:
    """The checkpoint; :class:`Expired` once past its expiry or after it was deleted."""
    rows = yield Query(
        "SELECT name, run_id, conversation_id, state, expires_at, expired_at, created_at, "
        f"updated_at FROM checkpoints WHERE {_CP_KEY}",
        (scope.tenant, scope.user, scope.agent_key, name, run_id),
    )
    if not rows:
        raise NotFound(f"no checkpoint {name}:{run_id}", kind="checkpoint")
    stored_name, stored_run, conversation_id, state, expires_at, expired_at, created, updated = (
        rows[0]
    )
    now = rt.clock()
    # A state whose owner's key was destroyed reads as a deleted checkpoint: expired.
    state = open_doc("checkpoints.state", checkpoint_row(scope, name, run_id), state)
    if expired_at is not None or state is None or (expires_at is not None and expires_at <= now):
        raise Expired(EXPIRED_MESSAGE, key=f"{name}:{run_id}")
    return Checkpoint(
        name=stored_name,
        run_id=stored_run,
        conversation_id=conversation_id,
        state=json.loads(state),
        expires_at=None if expires_at is None else from_micros(expires_at),
        created_at=from_micros(created),
        updated_at=from_micros(updated),
    )


def delete_checkpoint(rt: Runtime, scope: Scope, name: str, run_id: str) -> Op[None]:
    """Expire a checkpoint (a tombstone, so a late resume is told it expired, not 'not found')."""
    n = yield Exec(
        f"UPDATE checkpoints SET state = NULL, expired_at = ?, updated_at = ? WHERE {_CP_KEY} "
        "AND expired_at IS NULL",
        (rt.clock(), rt.clock(), scope.tenant, scope.user, scope.agent_key, name, run_id),
    )
    if not n:
        yield from load_checkpoint(rt, scope, name, run_id)  # NotFound or Expired


def get_snapshot(scope: Scope, conversation_id: str, run_id: str) -> Op[RunSnapshot]:
    yield from get_conversation(scope, conversation_id)
    rows = yield Query(
        "SELECT conversation_id, run_id, data, created_at, updated_at FROM run_snapshots "
        "WHERE conversation_id = ? AND run_id = ?",
        (conversation_id, run_id),
    )
    data = open_doc(
        "run_snapshots.data", snapshot_row(conversation_id, run_id), rows[0][2] if rows else None
    )
    if data is None:  # none, or its owner's data key was destroyed
        raise NotFound(f"no snapshot for run {run_id}", kind="snapshot")
    conversation, run, _, created_at, updated_at = rows[0]
    return RunSnapshot(
        conversation, run, json.loads(data), from_micros(created_at), from_micros(updated_at)
    )


def put_snapshot(
    rt: Runtime, scope: Scope, conversation_id: str, run_id: str, data: Any
) -> Op[RunSnapshot]:
    """Store (overwrite) the opaque snapshot a UI keeps for one run."""
    check_name(run_id, "run_id")
    text = seal_doc(
        "run_snapshots.data",
        snapshot_row(conversation_id, run_id),
        scope,
        sized(dump(data), "data"),
    )
    yield from hold_conversation(scope, conversation_id)
    now = rt.clock()
    yield Exec(
        "INSERT INTO run_snapshots (conversation_id, run_id, data, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (conversation_id, run_id) DO UPDATE SET "
        "data = excluded.data, updated_at = excluded.updated_at",
        (conversation_id, run_id, text, now, now),
    )
    return (yield from get_snapshot(scope, conversation_id, run_id))
