"""The durable job queue (sans-IO operations on the ``jobs`` table).

Life of a job::

    queued ──claim──▶ running ──complete──▶ done
      ▲                 │  └──fail (attempts left)──▶ queued (run_after = now + backoff)
      │                 └─────fail (no attempts left)──▶ dead ──retry──▶ queued
      └──── lease expired (worker died): claimable again, the attempt counts

* Debounce: a job with a ``key`` merges into the queued job of the same
  ``(kind, key)``: the newest payload replaces the old one, flags are ORed, and
  ``run_after`` is pushed back by the debounce delay but never past
  ``first_enqueued_at + max_wait``, so steady traffic cannot starve a key.
* Claims lock rows (``FOR UPDATE SKIP LOCKED`` on PostgreSQL, the database write
  lock on SQLite) and hand out a lease with a fencing token; a worker renews its
  lease while it runs, and only the holder of the current token can finish the job.
* A job whose key has a running job waits, so two runs of one key never overlap.
"""

from __future__ import annotations

import json
import secrets
from collections.abc import Mapping, Sequence
from typing import Any, NamedTuple

from memstrata.domain.jobs import Job, JobStatus
from memstrata.errors import Conflict, InvalidInput, NotFound
from memstrata.ids import parse_id
from memstrata.logs import current_request_id
from memstrata.storage.plan import Exec, Op, Query, Row
from memstrata.storage.records import check_text, dump_json, from_micros, storable_text
from memstrata.storage.sql import placeholders
from memstrata.usage.store import budget_clause

__all__ = [
    "UUID_KEYS",
    "Job",
    "JobStatus",
    "backoff_micros",
    "checked_payload",
    "claim",
    "complete",
    "enqueue",
    "fail",
    "get_job",
    "heartbeat",
    "list_jobs",
    "push_back",
    "queue_stats",
    "retry",
]

_S = 1_000_000


class _JobRow(NamedTuple):
    """A ``jobs`` row, its fields named as the columns."""

    id: str
    kind: str
    dedupe_key: str | None
    tenant_id: str
    user_id: str
    agent_id: str | None
    conversation_id: str | None
    payload: str | None
    flags: str | None
    status: str
    attempts: int
    max_attempts: int
    run_after: int
    first_enqueued_at: int
    enqueue_count: int
    lease_token: str | None
    worker: str | None
    last_error: str | None
    created_at: int
    updated_at: int
    finished_at: int | None
    request_id: str | None


_COLUMNS = ", ".join(_JobRow._fields)


def _job(row: Row) -> Job:
    r = _JobRow._make(row)
    return Job(
        id=r.id,
        kind=r.kind,
        key=r.dedupe_key,
        tenant=r.tenant_id,
        user=r.user_id,
        agent=r.agent_id or None,
        conversation_id=r.conversation_id,
        payload={} if r.payload is None else json.loads(r.payload),
        flags={} if r.flags is None else json.loads(r.flags),
        status=JobStatus(r.status),
        attempts=r.attempts,
        max_attempts=r.max_attempts,
        run_after=from_micros(r.run_after),
        first_enqueued_at=from_micros(r.first_enqueued_at),
        enqueue_count=r.enqueue_count,
        lease_token=r.lease_token,
        worker=r.worker,
        last_error=r.last_error,
        created_at=from_micros(r.created_at),
        updated_at=from_micros(r.updated_at),
        finished_at=None if r.finished_at is None else from_micros(r.finished_at),
        request_id=r.request_id,
    )


def backoff_micros(attempts: int, base_s: float = 2.0, cap_s: float = 600.0) -> int:
    """Exponential backoff (base * 2^(n-1), capped) with up to 25% random jitter."""
    delay = min(cap_s, base_s * 2 ** max(0, attempts - 1))
    jitter = delay * 0.25 * (secrets.randbelow(1000) / 1000)
    return int((delay + jitter) * _S)


def parse_status(value: str | None) -> JobStatus | None:
    if value is None:
        return None
    try:
        return JobStatus(value)
    except ValueError:
        raise InvalidInput(
            f"status must be one of {', '.join(s.value for s in JobStatus)}", field="status"
        ) from None


def get_job(job_id: str) -> Op[Job]:
    rows = yield Query(f"SELECT {_COLUMNS} FROM jobs WHERE id = ?", (job_id,))
    if not rows:
        raise NotFound(f"job {job_id} not found", kind="job")
    return _job(rows[0])


#: Payload keys naming messages, facts, receipts or records: UUIDs, checked as message ids.
UUID_KEYS = frozenset(
    {"leaf_id", "message_id", "message_ids", "fact_id", "fact_ids", "receipt_id", "context_id"}
)


def _storable(value: object, field: str) -> None:
    if not isinstance(value, str):
        raise InvalidInput(f"{field} must be a string", field=field)
    check_text(value, field)


def checked_payload(
    conversation_id: str | None, payload: dict[str, Any] | None
) -> tuple[str | None, dict[str, Any] | None]:
    """The conversation id and payload, checked before anything is queued: a payload value
    under a key of :data:`UUID_KEYS` (a string, a list of them, or None) must be a UUID,
    like a message id, and is kept in canonical form; every other id (the conversation, a
    value under a key ending ``_id``, such as a node memory's names) must be storable text
    (no NUL, no lone surrogate). A job whose ids no store can hold would fail on every
    attempt, so it is InvalidInput instead."""
    if conversation_id is not None:
        _storable(conversation_id, "conversation_id")
    if not payload:
        return conversation_id, payload
    out = dict(payload)
    for name, value in payload.items():
        if value is None:
            continue
        if name in UUID_KEYS and name.endswith("_ids"):
            if not isinstance(value, list):
                raise InvalidInput(f"{name} must be a list of ids", field=name)
            out[name] = [parse_id(v, field=name) for v in value]
        elif name in UUID_KEYS:
            out[name] = parse_id(value, field=name)
        elif name.endswith("_id"):
            _storable(value, name)
    return conversation_id, out


def enqueue(
    *,
    job_id: str,
    kind: str,
    key: str | None,
    tenant: str,
    user: str | None,
    agent: str | None,
    conversation_id: str | None,
    payload: dict[str, Any] | None,
    flags: dict[str, bool] | None,
    delay_s: float,
    max_wait_s: float,
    max_attempts: int,
    now: int,
) -> Op[Job]:
    """Queue a job, or merge it into the queued job with the same ``(kind, key)``."""
    if not kind or len(kind) > 100:
        raise InvalidInput("job kind must be 1-100 characters", field="kind")
    if max_attempts < 1:
        raise InvalidInput("max_attempts must be >= 1", field="max_attempts")
    if delay_s < 0 or max_wait_s < delay_s:
        raise InvalidInput("need 0 <= delay_s <= max_wait_s", field="delay_s")
    check_text(kind, "kind")
    check_text(key, "key")
    conversation_id, payload = checked_payload(conversation_id, payload)
    run_after = now + int(delay_s * _S)
    inserted = yield Exec(
        "INSERT INTO jobs (id, kind, dedupe_key, tenant_id, user_id, agent_id, conversation_id, "
        "payload, flags, status, max_attempts, run_after, first_enqueued_at, created_at, updated_at, "
        "request_id) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, 'queued', ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (kind, dedupe_key) WHERE status = 'queued' AND dedupe_key IS NOT NULL DO NOTHING",
        (
            job_id,
            kind,
            key,
            tenant,
            user,
            agent or "",
            conversation_id,
            dump_json(payload),
            dump_json({k: True for k, v in (flags or {}).items() if v}),
            max_attempts,
            run_after,
            now,
            now,
            now,
            current_request_id(),  # the request that queued it (logs follow it into the job)
        ),
    )
    if inserted:
        return (yield from get_job(job_id))
    # Merge into the queued job of this key; the UPDATE takes its row lock first.
    rows = yield Query(
        f"SELECT {_COLUMNS} FROM jobs WHERE kind = ? AND dedupe_key = ? AND status = 'queued'",
        (kind, key),
    )
    if not rows:  # pragma: no cover - it was claimed between the two statements; queue anew
        raise Conflict("the queued job was claimed while merging; enqueue again")
    old = _job(rows[0])
    merged_flags = dict(old.flags)
    merged_flags.update({k: True for k, v in (flags or {}).items() if v})
    deadline = int(old.first_enqueued_at.timestamp() * _S) + int(max_wait_s * _S)
    yield Exec(
        "UPDATE jobs SET payload = ?, flags = ?, run_after = ?, enqueue_count = enqueue_count + 1, "
        "updated_at = ? WHERE id = ? AND status = 'queued'",
        (dump_json(payload), dump_json(merged_flags), min(run_after, deadline), now, old.id),
    )
    return (yield from get_job(old.id))


def push_back(
    *,
    kind: str,
    key: str,
    payload: dict[str, Any] | None,
    delay_s: float,
    max_wait_s: float,
    now: int,
) -> Op[bool]:
    """The fast path of a flagless merge: one UPDATE of the queued job of ``(kind, key)``
    (new payload, run_after pushed back within its max wait). False: no queued job, so
    the caller enqueues."""
    run_after = now + int(delay_s * _S)
    wait = int(max_wait_s * _S)
    n = yield Exec(
        "UPDATE jobs SET payload = ?, enqueue_count = enqueue_count + 1, updated_at = ?, "
        "run_after = CASE WHEN ? < first_enqueued_at + ? THEN ? ELSE first_enqueued_at + ? END "
        "WHERE kind = ? AND dedupe_key = ? AND status = 'queued'",
        (dump_json(payload), now, run_after, wait, run_after, wait, kind, key),
    )
    return bool(n)


def claim(
    *,
    kinds: Sequence[str] | None,
    worker: str,
    now: int,
    lease_s: float | Mapping[str, float],
    limit: int = 1,
    purposes: Mapping[str, str] | None = None,
    low: Sequence[str] = (),
) -> Op[list[Job]]:
    """Lease up to ``limit`` ready jobs (queued and due, or running with an expired lease).

    ``lease_s`` is one lease for every kind, or a lease per kind: a short job must not
    inherit a long job's lease, or a crashed worker would hold it for that long.
    ``purposes`` maps job kinds to usage purposes: a job whose tenant has used up
    today's budget of its purpose is not claimed (it stays queued, no attempt counted,
    and is claimed once the day turns or the budget is raised).
    ``low`` names kinds of lower priority (upkeep such as receipt verification): a ready
    job of another kind is always claimed first, whichever has waited longer.
    """
    kind_sql = ""
    params: list[Any] = [now, now]
    if kinds is not None:
        if not kinds:
            return []
        kind_sql = f" AND j.kind IN ({placeholders(len(kinds))})"
        params.extend(kinds)
    budget_sql = ""
    if purposes:
        clause, budget_params = budget_clause(purposes, now)
        budget_sql = f" AND NOT {clause}"
        params.extend(budget_params)
    params.append(now)
    order = "j.run_after"
    if low:
        order = f"CASE WHEN j.kind IN ({placeholders(len(low))}) THEN 1 ELSE 0 END, j.run_after"
        params.extend(low)
    params.append(limit)
    rows = yield Query(
        "SELECT j.id, j.attempts, j.max_attempts, j.kind FROM jobs j WHERE "
        "((j.status = 'queued' AND j.run_after <= ?) OR (j.status = 'running' AND j.lease_until < ?))"
        f"{kind_sql}{budget_sql} AND NOT EXISTS (SELECT 1 FROM jobs r WHERE r.kind = j.kind "
        "AND r.dedupe_key = j.dedupe_key AND r.id <> j.id AND r.status = 'running' AND r.lease_until >= ?) "
        f"ORDER BY {order} LIMIT ?",
        params,
        lock="skip_locked",
    )
    claimed: list[Job] = []
    for job_id, attempts, max_attempts, kind in rows:
        lease = lease_s if isinstance(lease_s, int | float) else lease_s.get(kind, 60.0)
        lease_until = now + int(lease * _S)
        if attempts >= max_attempts:
            # Its last attempt died with its worker: nothing is left to try.
            yield Exec(
                "UPDATE jobs SET status = 'dead', lease_token = NULL, finished_at = ?, updated_at = ?, "
                "last_error = coalesce(last_error, 'lease expired on the last attempt') WHERE id = ?",
                (now, now, job_id),
            )
            continue
        token = secrets.token_hex(8)
        yield Exec(
            "UPDATE jobs SET status = 'running', attempts = attempts + 1, lease_until = ?, "
            "lease_token = ?, worker = ?, updated_at = ? WHERE id = ?",
            (lease_until, token, worker, now, job_id),
        )
        claimed.append((yield from get_job(job_id)))
    return claimed


def heartbeat(job_id: str, token: str, now: int, lease_s: float) -> Op[bool]:
    """Extend a running job's lease; False means the lease was lost (stop working on it)."""
    n = yield Exec(
        "UPDATE jobs SET lease_until = ?, updated_at = ? WHERE id = ? AND lease_token = ? AND status = 'running'",
        (now + int(lease_s * _S), now, job_id, token),
    )
    return bool(n)


def complete(job_id: str, token: str, now: int) -> Op[bool]:
    n = yield Exec(
        "UPDATE jobs SET status = 'done', lease_token = NULL, lease_until = NULL, finished_at = ?, "
        "updated_at = ?, last_error = NULL WHERE id = ? AND lease_token = ? AND status = 'running'",
        (now, now, job_id, token),
    )
    return bool(n)


def fail(job_id: str, token: str, error: str, now: int, backoff: int) -> Op[JobStatus | None]:
    """Record a failure: back to the queue after ``backoff`` µs, or dead when out of attempts."""
    rows = yield Query(
        "SELECT attempts, max_attempts FROM jobs WHERE id = ? AND lease_token = ? AND status = 'running'",
        (job_id, token),
    )
    if not rows:
        return None  # the lease was lost; whoever holds it now decides
    attempts, max_attempts = rows[0]
    status = JobStatus.DEAD if attempts >= max_attempts else JobStatus.QUEUED
    yield Exec(
        "UPDATE jobs SET status = ?, lease_token = NULL, lease_until = NULL, last_error = ?, "
        "run_after = ?, updated_at = ?, finished_at = ? WHERE id = ?",
        (
            status.value,
            storable_text(error[:4000]),
            now + backoff,
            now,
            now if status is JobStatus.DEAD else None,
            job_id,
        ),
    )
    return status


def retry(job_id: str, now: int, tenant: str | None = None) -> Op[Job]:
    """Send a dead job back to the queue with fresh attempts."""
    job = yield from get_job(job_id)
    if tenant is not None and job.tenant != tenant:
        raise NotFound(f"job {job_id} not found", kind="job")
    if job.status is not JobStatus.DEAD:
        raise Conflict(f"job {job_id} is {job.status.value}; only dead jobs can be retried")
    yield Exec(
        "UPDATE jobs SET status = 'queued', attempts = 0, run_after = ?, first_enqueued_at = ?, "
        "finished_at = NULL, updated_at = ? WHERE id = ? AND status = 'dead'",
        (now, now, now, job_id),
    )
    return (yield from get_job(job_id))


def list_jobs(
    *,
    tenant: str | None,
    user: str | None,
    status: JobStatus | None,
    before_created: int | None,
    limit: int,
) -> Op[list[tuple[Job, int]]]:
    """Newest first; each job comes with its ``created_at`` micros for the cursor."""
    where = ["1 = 1"]
    params: list[Any] = []
    if tenant is not None:
        where.append("tenant_id = ?")
        params.append(tenant)
    if user is not None:
        where.append("user_id = ?")
        params.append(user)
    if status is not None:
        where.append("status = ?")
        params.append(status.value)
    if before_created is not None:
        where.append("created_at < ?")
        params.append(before_created)
    rows = yield Query(
        f"SELECT {_COLUMNS} FROM jobs WHERE {' AND '.join(where)} ORDER BY created_at DESC, id DESC LIMIT ?",
        (*params, limit),
    )
    return [(_job(r), _JobRow._make(r).created_at) for r in rows]


def queue_stats(now: int) -> Op[dict[str, Any]]:
    """Counts by status and the age of the oldest ready job (for metrics and doctor)."""
    rows = yield Query("SELECT status, count(*) FROM jobs GROUP BY status")
    counts = {s.value: 0 for s in JobStatus}
    counts.update({r[0]: int(r[1]) for r in rows})
    oldest = yield Query(
        "SELECT min(run_after) FROM jobs WHERE status = 'queued' AND run_after <= ?", (now,)
    )
    age = 0.0 if not oldest or oldest[0][0] is None else (now - int(oldest[0][0])) / _S
    return {"counts": counts, "oldest_ready_age_s": age}


def delete_for_conversations(ids: Sequence[str]) -> Op[None]:
    """Cascade step: jobs about a deleted conversation go with it."""
    yield Exec(f"DELETE FROM jobs WHERE conversation_id IN ({placeholders(len(ids))})", ids)


def delete_for_messages(conversation_id: str, ids: Sequence[str]) -> Op[None]:
    """Cascade step: no job keeps a deleted message's id (the deletion's receipt scans for
    it), whatever its status.

    A job up to a deleted leaf (``leaf_id``: a compaction or an extraction) keeps its place
    with a null leaf: queued, it runs on the active leaf, where the deletion moved it (the
    rest of the conversation still needs it); finished, its record stays. A job naming a
    deleted message anywhere else in its payload goes, unless it is running (it finishes
    or fails on its own; its handler has the payload already)."""
    rows = yield Query(
        "SELECT id, payload, status FROM jobs WHERE conversation_id = ? AND payload IS NOT NULL",
        (conversation_id,),
    )
    gone = set(ids)
    doomed, repointed = [], []
    for jid, text, status in rows:
        payload = json.loads(text)
        if not gone.intersection(_strings(payload)):
            continue
        if isinstance(payload, dict) and payload.get("leaf_id") in gone:
            payload = {**payload, "leaf_id": None}
            if not gone.intersection(_strings(payload)):
                repointed.append((jid, payload, text))
                continue
        if status != "running":
            doomed.append(jid)
    for jid, payload, was in repointed:
        # Only the payload read: an enqueue merged meanwhile named a leaf that is still there.
        yield Exec(
            "UPDATE jobs SET payload = ? WHERE id = ? AND payload = ?",
            (dump_json(payload), jid, was),
        )
    for start in range(0, len(doomed), 500):
        batch = doomed[start : start + 500]
        yield Exec(
            f"DELETE FROM jobs WHERE id IN ({placeholders(len(batch))}) AND status <> 'running'",
            batch,
        )


def _strings(value: Any) -> set[str]:
    """Every string inside a decoded JSON payload."""
    if isinstance(value, str):
        return {value}
    if isinstance(value, dict):
        return set().union(*(_strings(v) for v in value.values()))
    if isinstance(value, list):
        return set().union(*(_strings(v) for v in value))
    return set()


def delete_for_user(tenant: str, user: str) -> Op[None]:
    """Cascade step: a deleted user's jobs go with the user."""
    yield Exec("DELETE FROM jobs WHERE tenant_id = ? AND user_id = ?", (tenant, user))


def queued_by_key(kind: str, key: str) -> Op[Job | None]:
    """The queued (not yet running) job of ``(kind, key)``, if any."""
    rows = yield Query(
        f"SELECT {_COLUMNS} FROM jobs WHERE kind = ? AND dedupe_key = ? AND status = 'queued'",
        (kind, key),
    )
    return _job(rows[0]) if rows else None


def counts_of(kinds: Sequence[str]) -> Op[dict[str, int]]:
    """Jobs of ``kinds`` by status (every status present, zeros included)."""
    rows = yield Query(
        f"SELECT status, count(*) FROM jobs WHERE kind IN ({placeholders(len(kinds))}) "
        "GROUP BY status",
        list(kinds),
    )
    counts = {s.value: 0 for s in JobStatus}
    counts.update({r[0]: int(r[1]) for r in rows})
    return counts
