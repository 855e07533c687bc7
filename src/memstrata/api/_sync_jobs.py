"""Generated from ``_async_jobs.py`` by ``scripts/unasync.py``: do not edit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memstrata.api._sync_base import SubAPI
from memstrata.errors import NotFound
from memstrata.jobs import ops as jobs_ops
from memstrata.jobs import presence as presence_ops
from memstrata.jobs.ops import Job
from memstrata.jobs.presence import Presence
from memstrata.jobs.worker import Handler, Worker
from memstrata.runtime import page_limit
from memstrata.storage import sql
from memstrata.types import Page, Scope
from memstrata.usage import store as usage_ops
from memstrata.validation import checked_scope as _scope

__all__ = ["BUDGET_BLOCKED", "Jobs"]

#: A queued job's ``blocked`` when its tenant's budget of its purpose is used up today.
BUDGET_BLOCKED = "budget"


class Jobs(SubAPI):
    """The durable background queue shared by every feature (see :mod:`memstrata.jobs.ops`)."""

    def register(self, kind: str, handler: Handler[Any], *, lease_s: float = 60.0) -> None:
        """Run ``handler(job, memory)`` for jobs of ``kind``; it must be idempotent."""
        self._core.jobs.register(kind, handler, lease_s=lease_s)

    def kinds(self) -> list[str]:
        """The job kinds this process runs (the features' and those registered here)."""
        return self._core.jobs.kinds()

    def worker(self) -> Worker[Any]:
        """This process's worker (created on first use, not started): ``start(threads=n)``
        and ``stop()`` run it as a long-lived service (``memstrata worker``)."""
        return self._core.worker()

    def start_local_worker(self) -> None:
        """Start the in-process worker (once) when this memory runs one (settings
        ``worker``): a long-running process calls it at start, so jobs an earlier process
        left queued run without waiting for a new one."""
        self._core.start_local_worker()

    def enqueue(
        self,
        scope: Scope,
        kind: str,
        *,
        key: str | None = None,
        payload: dict[str, Any] | None = None,
        flags: dict[str, bool] | None = None,
        conversation_id: str | None = None,
        delay_s: float = 0.0,
        max_wait_s: float | None = None,
        max_attempts: int = 5,
    ) -> Job:
        """Queue a job; with a ``key``, merge into the queued job of the same kind and key."""
        s = _scope(scope)
        return self._enqueue(
            kind,
            tenant=s.tenant,
            user=s.user,
            agent=s.agent,
            key=key,
            conversation_id=conversation_id,
            payload=payload,
            flags=flags,
            delay_s=delay_s,
            max_wait_s=max_wait_s if max_wait_s is not None else max(delay_s * 10, delay_s),
            max_attempts=max_attempts,
        )

    def blocked(self, kind: str) -> str | None:
        """Why this process cannot run jobs of ``kind`` now (they wait, queued), or None."""
        return self._core.jobs.blocked(kind)

    def blocked_reasons(self, jobs: Sequence[Job]) -> dict[str, str]:
        """Why each waiting (queued) job of ``jobs`` waits, by job id: this process cannot
        run its kind (e.g. no LLM), or ``"budget"``: its tenant used up today's (UTC)
        budget of the job's purpose (it runs once the day turns or the budget is raised)."""
        registry = self._core.jobs
        queued = [j for j in jobs if j.status is jobs_ops.JobStatus.QUEUED]
        tenants = sorted({j.tenant for j in queued if registry.purpose(j.kind) is not None})
        spent: set[tuple[str, str]] = set()
        if tenants:
            self._core.flush_usage()
            spent = self._read(usage_ops.exhausted, tenants, self._core.rt.clock())
        out: dict[str, str] = {}
        for job in queued:
            reason = registry.blocked(job.kind)
            if reason is None and (job.tenant, registry.purpose(job.kind) or "") in spent:
                reason = BUDGET_BLOCKED
            if reason is not None:
                out[job.id] = reason
        return out

    def get(self, job_id: str, *, tenant: str | None = None, user: str | None = None) -> Job:
        job = self._read(jobs_ops.get_job, job_id)
        if (tenant is not None and job.tenant != tenant) or (user is not None and job.user != user):
            raise NotFound(f"job {job_id} not found", kind="job")
        return job

    def list(
        self,
        *,
        tenant: str | None = None,
        user: str | None = None,
        status: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[Job]:
        """Newest first, optionally only one tenant's (or user's) jobs in one status."""
        st = jobs_ops.parse_status(status)
        n = page_limit(self._core.rt, limit)
        before = sql.seq_cursor(cursor)
        rows = self._read(
            jobs_ops.list_jobs,
            tenant=tenant,
            user=user,
            status=st,
            before_created=before,
            limit=n + 1,
        )
        items = [job for job, _ in rows[:n]]
        return Page(items, sql.encode_cursor(rows[n - 1][1]) if len(rows) > n else None)

    def retry(self, job_id: str, *, tenant: str | None = None) -> Job:
        """Send a dead job back to the queue."""
        now = self._core.rt.clock()
        job = self._write(jobs_ops.retry, job_id, now, tenant)
        self._core.job_queued()
        return job

    def stats(self) -> dict[str, Any]:
        now = self._core.rt.clock()
        return self._read(jobs_ops.queue_stats, now)

    def presence(self, *, tenant: str | None = None, user: str | None = None) -> Presence:
        """Due jobs (all, a tenant's or a user's) and whether any worker runs them:
        ``.warning`` is one line for people when jobs are due and no worker was seen lately."""
        now = self._core.rt.clock()
        return self._read(presence_ops.presence, now, tenant=tenant, user=user)

    def run_pending(
        self, kinds: Sequence[str] | None = None, max_jobs: int | None = None
    ) -> int:
        """Run every ready job now, in this process; returns how many ran (tests, flushes)."""
        return self._core.run_pending(kinds, max_jobs)
