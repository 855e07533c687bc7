"""Agent state (sans-IO): working memory, plans, iteration logs, checkpoints, run snapshots.

Versioned documents (working memory, plans) are written with compare-and-set:
a caller that read version ``n`` writes with ``expected_version=n`` and loses
with :class:`~memstrata.errors.PreconditionFailed` if someone wrote in between,
so two conversations updating one user's working memory never corrupt it.
``expected_version=0`` means "only if absent"; ``None`` creates or overwrites.

Conversation-bound rows (plans, iterations, snapshots, per-conversation working
memory) are reached only through a conversation the caller's scope owns.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from memstrata import strictjson
from memstrata.conversation.ops import get_conversation, hold_conversation, page_limit
from memstrata.errors import Expired, InvalidInput, NotFound, PreconditionFailed
from memstrata.runtime import Runtime
from memstrata.state.jsonschema import check_schema, validate
from memstrata.storage import tenancy
from memstrata.storage.plan import Exec, Op, Query, Row
from memstrata.storage.records import check_text, from_micros
from memstrata.storage.sql import encode_cursor, seq_cursor
from memstrata.types import Page, Scope

__all__ = [
    "EXPIRED_MESSAGE",
    "Checkpoint",
    "Iteration",
    "PlanDoc",
    "RunSnapshot",
    "WorkingMemory",
    "append_iteration",
    "delete_checkpoint",
    "delete_for_conversations",
    "delete_for_user",
    "delete_working_memory",
    "get_plan",
    "get_snapshot",
    "get_working_memory",
    "list_iterations",
    "load_checkpoint",
    "put_plan",
    "put_snapshot",
    "put_working_memory",
    "save_checkpoint",
]

EXPIRED_MESSAGE = "This action has expired and cannot be resumed. Please start a new turn."
Format = Literal["markdown", "json"]
_MAX_DOC_BYTES = 256_000


def _dump(value: Any) -> str:
    # Strict: NaN, Infinity or a lone surrogate is refused (InvalidInput), never stored.
    return strictjson.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def _sized(text: str, what: str) -> str:
    check_text(text, what)
    if len(text.encode()) > _MAX_DOC_BYTES:
        raise InvalidInput(f"{what} is over {_MAX_DOC_BYTES} bytes", field=what)
    return text


def _name(value: str, what: str) -> str:
    if not isinstance(value, str) or not 1 <= len(value) <= 255:
        raise InvalidInput(f"{what} must be 1-255 characters", field=what)
    check_text(value, what)
    return value


def _expected(expected: int | None) -> None:
    if expected is not None and expected < 0:
        raise InvalidInput("expected_version must be >= 0", field="expected_version")


# -- working memory --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class WorkingMemory:
    """One working-memory document: the user's (``conversation_id`` None) or one conversation's."""

    conversation_id: str | None
    format: Format
    content: Any  # str for markdown, a JSON value for json
    json_schema: dict[str, Any] | None
    template: Any
    version: int
    updated_at: datetime

    @property
    def text(self) -> str:
        """The document as injected into a prompt."""
        if self.format == "markdown":
            return str(self.content)
        return json.dumps(self.content, ensure_ascii=False, indent=2, sort_keys=True)

    def to_dict(self) -> dict[str, Any]:
        return {
            "scope": "user" if self.conversation_id is None else "conversation",
            "conversation_id": self.conversation_id,
            "format": self.format,
            "content": self.content,
            "json_schema": self.json_schema,
            "template": self.template,
            "version": self.version,
            "updated_at": self.updated_at.isoformat(),
        }


_WM_COLUMNS = "conversation_id, format, content, json_schema, template, version, updated_at"


def _to_wm(row: Row) -> WorkingMemory:
    fmt: Format = "json" if row[1] == "json" else "markdown"
    return WorkingMemory(
        conversation_id=row[0] or None,
        format=fmt,
        content=json.loads(row[2]) if fmt == "json" else row[2],
        json_schema=None if row[3] is None else json.loads(row[3]),
        template=None if row[4] is None else json.loads(row[4]),
        version=row[5],
        updated_at=from_micros(row[6]),
    )


def _wm_key(scope: Scope, conversation_id: str | None) -> tuple[str, str, str, str]:
    return (scope.tenant, scope.user, scope.agent_key, conversation_id or "")


def _wm_row(
    scope: Scope, conversation_id: str | None, lock: Literal["update"] | None = None
) -> Op[Row | None]:
    rows = yield Query(
        f"SELECT {_WM_COLUMNS} FROM working_memory WHERE tenant_id = ? AND user_id = ? "
        "AND agent_id = ? AND conversation_id = ?",
        _wm_key(scope, conversation_id),
        lock=lock,
    )
    return rows[0] if rows else None


def get_working_memory(scope: Scope, conversation_id: str | None = None) -> Op[WorkingMemory]:
    if conversation_id is not None:
        yield from get_conversation(scope, conversation_id)
    row = yield from _wm_row(scope, conversation_id)
    if row is None:
        raise NotFound("no working memory in this scope", kind="working_memory")
    return _to_wm(row)


def _check_template(fmt: Format, content: Any, template: Any) -> None:
    if fmt != "json" or template is None:
        return
    if not isinstance(template, dict):
        raise InvalidInput("a JSON template must be an object of field names", field="template")
    if not isinstance(content, dict):
        raise InvalidInput(
            "content must be a JSON object (the template has fields)", field="content"
        )
    extra = sorted(set(content) - set(template))
    if extra:
        raise InvalidInput(f"content has fields the template lacks: {extra}", field="content")


def put_working_memory(
    rt: Runtime,
    scope: Scope,
    content: Any,
    *,
    conversation_id: str | None = None,
    format: Format | None = None,
    json_schema: dict[str, Any] | None = None,
    template: Any = None,
    expected_version: int | None = None,
) -> Op[WorkingMemory]:
    """Write the document; a schema or template given once is kept for later writes.

    Without ``expected_version`` the write creates or overwrites, so it never answers
    PreconditionFailed: it reads the row locked, and a concurrent creation it loses
    to (its insert does nothing) sends it round once more to overwrite that row.
    """
    _expected(expected_version)
    now = rt.clock()
    yield from tenancy.ensure_user(scope.tenant, scope.user, now)  # user before conversation
    if conversation_id is not None:
        yield from hold_conversation(scope, conversation_id)
    key = _wm_key(scope, conversation_id)
    for _ in range(3):
        current = yield from _wm_row(scope, conversation_id, lock="update")
        old = None if current is None else _to_wm(current)
        fmt, stored, schema_text, tmpl_text = _wm_document(
            content, old, format=format, json_schema=json_schema, template=template
        )
        if old is None:
            if expected_version not in (None, 0):
                raise PreconditionFailed(
                    "working memory changed (it does not exist)", current_version=0
                )
            n = yield Exec(
                "INSERT INTO working_memory (tenant_id, user_id, agent_id, conversation_id, format, "
                "content, json_schema, template, version, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?) ON CONFLICT DO NOTHING",
                (*key, fmt, stored, schema_text, tmpl_text, now),
            )
            if not n and expected_version == 0:
                raise PreconditionFailed("working memory was created concurrently")
        else:
            if expected_version is not None and expected_version != old.version:
                raise PreconditionFailed(
                    f"working memory is at version {old.version}, not {expected_version}",
                    current_version=old.version,
                )
            # The version in the WHERE clause makes the write atomic across processes.
            n = yield Exec(
                "UPDATE working_memory SET format = ?, content = ?, json_schema = ?, "
                "template = ?, version = ?, updated_at = ? WHERE tenant_id = ? AND user_id = ? "
                "AND agent_id = ? AND conversation_id = ? AND version = ?",
                (fmt, stored, schema_text, tmpl_text, old.version + 1, now, *key, old.version),
            )
            if not n and expected_version is not None:
                raise PreconditionFailed("working memory changed concurrently")
        if n:
            row = yield from _wm_row(scope, conversation_id)
            assert row is not None
            return _to_wm(row)
    raise PreconditionFailed("working memory keeps changing concurrently; retry")


def _wm_document(
    content: Any,
    old: WorkingMemory | None,
    *,
    format: Format | None,
    json_schema: dict[str, Any] | None,
    template: Any,
) -> tuple[Format, str, str | None, str | None]:
    """The checked document to store: format, text, schema text and template text."""
    fmt: Format = format or (
        old.format if old else ("markdown" if isinstance(content, str) else "json")
    )
    if fmt not in ("markdown", "json"):
        raise InvalidInput("format must be markdown or json", field="format")
    schema = json_schema if json_schema is not None else (old.json_schema if old else None)
    tmpl = template if template is not None else (old.template if old else None)
    if schema is not None:
        if fmt != "json":
            raise InvalidInput("a json_schema needs format json", field="json_schema")
        check_schema(schema)
        validate(content, schema)
    if fmt == "markdown" and not isinstance(content, str):
        raise InvalidInput("markdown working memory must be a string", field="content")
    _check_template(fmt, content, tmpl)
    stored = _sized(content if fmt == "markdown" else _dump(content), "content")
    schema_text = None if schema is None else _sized(_dump(schema), "json_schema")
    tmpl_text = None if tmpl is None else _sized(_dump(tmpl), "template")
    return fmt, stored, schema_text, tmpl_text


def delete_working_memory(scope: Scope, conversation_id: str | None = None) -> Op[None]:
    if conversation_id is not None:
        yield from get_conversation(scope, conversation_id)
    n = yield Exec(
        "DELETE FROM working_memory WHERE tenant_id = ? AND user_id = ? AND agent_id = ? "
        "AND conversation_id = ?",
        _wm_key(scope, conversation_id),
    )
    if not n:
        raise NotFound("no working memory in this scope", kind="working_memory")


# -- plans -----------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class PlanDoc:
    conversation_id: str
    document: Any
    version: int
    updated_at: datetime

    def to_dict(self) -> dict[str, Any]:
        return {
            "conversation_id": self.conversation_id,
            "document": self.document,
            "version": self.version,
            "updated_at": self.updated_at.isoformat(),
        }


def _plan_row(conversation_id: str) -> Op[PlanDoc | None]:
    rows = yield Query(
        "SELECT conversation_id, document, version, updated_at FROM plans WHERE conversation_id = ?",
        (conversation_id,),
    )
    if not rows:
        return None
    r = rows[0]
    return PlanDoc(r[0], json.loads(r[1]), r[2], from_micros(r[3]))


def get_plan(scope: Scope, conversation_id: str) -> Op[PlanDoc]:
    yield from get_conversation(scope, conversation_id)
    plan = yield from _plan_row(conversation_id)
    if plan is None:
        raise NotFound(f"conversation {conversation_id} has no plan", kind="plan")
    return plan


def find_plan(scope: Scope, conversation_id: str) -> Op[PlanDoc | None]:
    """The plan, or None (for context assembly, which must not fail without one)."""
    yield from get_conversation(scope, conversation_id)
    return (yield from _plan_row(conversation_id))


def put_plan(
    rt: Runtime,
    scope: Scope,
    conversation_id: str,
    document: Any,
    *,
    expected_version: int | None = None,
) -> Op[PlanDoc]:
    """Write the plan. Without ``expected_version`` it creates or overwrites in one
    upsert, so concurrent unconditional writes all succeed (the last one stays)."""
    _expected(expected_version)
    text = _sized(_dump(document), "document")
    yield from hold_conversation(scope, conversation_id)
    now = rt.clock()
    if expected_version is None:
        yield Exec(
            "INSERT INTO plans (conversation_id, document, version, updated_at) VALUES (?, ?, 1, ?) "
            "ON CONFLICT (conversation_id) DO UPDATE SET document = excluded.document, "
            "version = plans.version + 1, updated_at = excluded.updated_at",
            (conversation_id, text, now),
        )
    elif expected_version == 0:
        n = yield Exec(
            "INSERT INTO plans (conversation_id, document, version, updated_at) "
            "VALUES (?, ?, 1, ?) ON CONFLICT DO NOTHING",
            (conversation_id, text, now),
        )
        if not n:
            old = yield from _plan_row(conversation_id)
            raise PreconditionFailed(
                "the plan exists already", current_version=0 if old is None else old.version
            )
    else:
        n = yield Exec(
            "UPDATE plans SET document = ?, version = ?, updated_at = ? "
            "WHERE conversation_id = ? AND version = ?",
            (text, expected_version + 1, now, conversation_id, expected_version),
        )
        if not n:
            old = yield from _plan_row(conversation_id)
            if old is None:
                raise PreconditionFailed("the plan does not exist", current_version=0)
            raise PreconditionFailed(
                f"the plan is at version {old.version}, not {expected_version}",
                current_version=old.version,
            )
    plan = yield from _plan_row(conversation_id)
    assert plan is not None
    return plan


# -- iteration logs --------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Iteration:
    """One attempt at a task (append-only)."""

    seq: int
    conversation_id: str
    task: str
    attempt: int
    outcome: str
    error: str | None
    detail: dict[str, Any]
    created_at: datetime

    def to_dict(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "conversation_id": self.conversation_id,
            "task": self.task,
            "attempt": self.attempt,
            "outcome": self.outcome,
            "error": self.error,
            "detail": self.detail,
            "created_at": self.created_at.isoformat(),
        }


_IT_COLUMNS = "seq, conversation_id, task, attempt, outcome, error, detail, created_at"


def _to_iteration(r: Row) -> Iteration:
    detail = {} if r[6] is None else json.loads(r[6])
    return Iteration(r[0], r[1], r[2], r[3], r[4], r[5], detail, from_micros(r[7]))


def append_iteration(
    rt: Runtime,
    scope: Scope,
    conversation_id: str,
    task: str,
    *,
    outcome: str,
    error: str | None = None,
    attempt: int | None = None,
    detail: dict[str, Any] | None = None,
) -> Op[Iteration]:
    """Log an attempt; ``attempt`` defaults to one more than the task's last."""
    _name(task, "task")
    _name(outcome, "outcome")
    if error is not None:
        _sized(error, "error")
    yield from hold_conversation(scope, conversation_id)
    if attempt is None:
        rows = yield Query(
            "SELECT max(attempt) FROM iteration_logs WHERE conversation_id = ? AND task = ?",
            (conversation_id, task),
        )
        attempt = (rows[0][0] or 0) + 1
    elif attempt < 1:
        raise InvalidInput("attempt must be >= 1", field="attempt")
    now = rt.clock()
    yield Exec(
        "INSERT INTO iteration_logs (conversation_id, task, attempt, outcome, error, detail, "
        "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (conversation_id, task, attempt, outcome, error, _dump(detail) if detail else None, now),
    )
    rows = yield Query(
        f"SELECT {_IT_COLUMNS} FROM iteration_logs WHERE conversation_id = ? "
        "ORDER BY seq DESC LIMIT 1",
        (conversation_id,),
    )
    return _to_iteration(rows[0])


def list_iterations(
    rt: Runtime,
    scope: Scope,
    conversation_id: str,
    *,
    task: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Op[Page[Iteration]]:
    """Oldest first (the order a retry briefing reads them in)."""
    n = page_limit(rt, limit)
    after = seq_cursor(cursor) or 0
    yield from get_conversation(scope, conversation_id)
    sql = f"SELECT {_IT_COLUMNS} FROM iteration_logs WHERE conversation_id = ? AND seq > ?"
    params: list[Any] = [conversation_id, after]
    if task is not None:
        sql += " AND task = ?"
        params.append(task)
    rows = yield Query(sql + " ORDER BY seq LIMIT ?", (*params, n + 1))
    items = [_to_iteration(r) for r in rows[:n]]
    return Page(items, encode_cursor(items[-1].seq) if len(rows) > n else None)


# -- checkpoints -----------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Suspended agent state keyed ``name:run_id``."""

    name: str
    run_id: str
    conversation_id: str | None
    state: Any
    expires_at: datetime | None
    created_at: datetime
    updated_at: datetime

    @property
    def key(self) -> str:
        return f"{self.name}:{self.run_id}"

    def to_dict(self) -> dict[str, Any]:
        return {
            "key": self.key,
            "name": self.name,
            "run_id": self.run_id,
            "conversation_id": self.conversation_id,
            "state": self.state,
            "expires_at": None if self.expires_at is None else self.expires_at.isoformat(),
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
        }


_CP_KEY = "tenant_id = ? AND user_id = ? AND agent_id = ? AND name = ? AND run_id = ?"


MAX_TTL_S = 10 * 365 * 86_400


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
    key = (scope.tenant, scope.user, scope.agent_key, _name(name, "name"), _name(run_id, "run_id"))
    # A checkpoint lives at most ten years; anything longer (or not finite) is a mistake.
    if ttl_s is not None and not 0 < ttl_s <= MAX_TTL_S:
        raise InvalidInput(f"ttl_s must be > 0 and at most {MAX_TTL_S} (ten years)", field="ttl_s")
    text = _sized(_dump(state), "state")
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
    r = rows[0]
    now = rt.clock()
    if r[5] is not None or r[3] is None or (r[4] is not None and r[4] <= now):
        raise Expired(EXPIRED_MESSAGE, key=f"{name}:{run_id}")
    return Checkpoint(
        name=r[0],
        run_id=r[1],
        conversation_id=r[2],
        state=json.loads(r[3]),
        expires_at=None if r[4] is None else from_micros(r[4]),
        created_at=from_micros(r[6]),
        updated_at=from_micros(r[7]),
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


# -- run snapshots ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class RunSnapshot:
    conversation_id: str
    run_id: str
    data: Any
    created_at: datetime
    updated_at: datetime

    def to_dict(self) -> dict[str, Any]:
        return {
            "conversation_id": self.conversation_id,
            "run_id": self.run_id,
            "data": self.data,
            "created_at": self.created_at.isoformat(),
            "updated_at": self.updated_at.isoformat(),
        }


def get_snapshot(scope: Scope, conversation_id: str, run_id: str) -> Op[RunSnapshot]:
    yield from get_conversation(scope, conversation_id)
    rows = yield Query(
        "SELECT conversation_id, run_id, data, created_at, updated_at FROM run_snapshots "
        "WHERE conversation_id = ? AND run_id = ?",
        (conversation_id, run_id),
    )
    if not rows:
        raise NotFound(f"no snapshot for run {run_id}", kind="snapshot")
    r = rows[0]
    return RunSnapshot(r[0], r[1], json.loads(r[2]), from_micros(r[3]), from_micros(r[4]))


def put_snapshot(
    rt: Runtime, scope: Scope, conversation_id: str, run_id: str, data: Any
) -> Op[RunSnapshot]:
    """Store (overwrite) the opaque snapshot a UI keeps for one run."""
    _name(run_id, "run_id")
    text = _sized(_dump(data), "data")
    yield from hold_conversation(scope, conversation_id)
    now = rt.clock()
    yield Exec(
        "INSERT INTO run_snapshots (conversation_id, run_id, data, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?) ON CONFLICT (conversation_id, run_id) DO UPDATE SET "
        "data = excluded.data, updated_at = excluded.updated_at",
        (conversation_id, run_id, text, now, now),
    )
    return (yield from get_snapshot(scope, conversation_id, run_id))


# -- cascade ---------------------------------------------------------------------------------


def delete_for_conversations(ids: Sequence[str]) -> Op[None]:
    marks = ", ".join("?" * len(ids))
    for table in (
        "working_memory",
        "plans",
        "iteration_logs",
        "checkpoints",
        "run_snapshots",
        "summaries",
        "compaction_log",
    ):
        yield Exec(f"DELETE FROM {table} WHERE conversation_id IN ({marks})", ids)


def delete_for_user(tenant: str, user: str) -> Op[None]:
    for table in ("working_memory", "checkpoints"):
        yield Exec(f"DELETE FROM {table} WHERE tenant_id = ? AND user_id = ?", (tenant, user))
