"""Workers that claim and run jobs: in-process threads or ``memstrata worker`` processes.

A worker claims a job with a lease, renews the lease while the handler runs,
and then completes or fails it with its fencing token. A worker killed mid-job
simply stops renewing: once the lease runs out another worker reclaims the job
(the attempt counts), so nothing queued is ever lost and a job never runs in
two places at once while its lease is alive. Handlers must therefore be
idempotent: a job can run again after a crash.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
import traceback
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import Generic, Protocol, TypeVar

from memstrata.errors import InvalidInput
from memstrata.jobs import ops, presence
from memstrata.jobs.ops import Job
from memstrata.logs import bound_request_id
from memstrata.storage.engine import Engine
from memstrata.storage.plan import write
from memstrata.storage.sql import now_micros
from memstrata.usage.scope import usage_scope
from memstrata.usage.store import JOB_PURPOSES

__all__ = ["Handler", "JobRegistry", "LocalWakeup", "Wakeup", "Worker"]

log = logging.getLogger("memstrata.jobs")

C = TypeVar("C")
Handler = Callable[[Job, C], None]


@dataclass(frozen=True, slots=True)
class _Entry(Generic[C]):
    handler: Handler[C]
    lease_s: float
    blocked: Callable[[], str | None] | None = None
    purpose: str | None = None
    low_priority: bool = False


class JobRegistry(Generic[C]):
    """Job kinds and their handlers; features register theirs when a memory opens."""

    def __init__(self) -> None:
        self._entries: dict[str, _Entry[C]] = {}
        self._lock = threading.Lock()

    def register(
        self,
        kind: str,
        handler: Handler[C],
        *,
        lease_s: float = 60.0,
        blocked: Callable[[], str | None] | None = None,
        purpose: str | None = None,
        low_priority: bool = False,
    ) -> None:
        """``blocked`` says why this process cannot run the kind now (e.g. no LLM), or
        None: blocked jobs are not claimed here; they stay queued and visible.
        ``purpose`` names the usage purpose its model calls spend (default: the kind's
        in :data:`~memstrata.usage.store.JOB_PURPOSES`): a tenant's budget of that
        purpose holds its jobs back once used up for the day. ``low_priority`` jobs are
        claimed only when no other ready job of this process's kinds waits (upkeep that
        must never hold back users' work)."""
        if lease_s <= 0:
            raise InvalidInput("lease_s must be > 0", field="lease_s")
        with self._lock:
            self._entries[kind] = _Entry(handler, lease_s, blocked, purpose, low_priority)

    def get(self, kind: str) -> _Entry[C] | None:
        return self._entries.get(kind)

    def blocked(self, kind: str) -> str | None:
        """Why jobs of ``kind`` wait in this process, or None when they can run."""
        entry = self._entries.get(kind)
        return None if entry is None or entry.blocked is None else entry.blocked()

    def runnable(self, kinds: Sequence[str] | None = None) -> list[str]:
        """The registered kinds (of ``kinds``) that are not blocked."""
        names = self.kinds() if kinds is None else [k for k in kinds if k in self._entries]
        return [k for k in names if self.blocked(k) is None]

    def kinds(self) -> list[str]:
        return sorted(self._entries)

    def purpose(self, kind: str) -> str | None:
        """The usage purpose of jobs of ``kind`` (None: no budget applies to it)."""
        entry = self._entries.get(kind)
        if entry is not None and entry.purpose is not None:
            return entry.purpose
        return JOB_PURPOSES.get(kind)

    def purposes(self, kinds: Sequence[str] | None = None) -> dict[str, str]:
        """``{kind: purpose}`` of the kinds (of ``kinds``) that have a purpose."""
        names = self.kinds() if kinds is None else kinds
        return {k: p for k in names if (p := self.purpose(k)) is not None}


class Wakeup(Protocol):
    """Tells sleeping workers that a job was queued (an optimisation: workers also poll)."""

    def notify(self) -> None: ...

    def wait(self, timeout: float) -> bool: ...

    def close(self) -> None: ...


class LocalWakeup:
    """Wake-ups inside one process."""

    def __init__(self) -> None:
        self._event = threading.Event()

    def notify(self) -> None:
        self._event.set()

    def wait(self, timeout: float) -> bool:
        woke = self._event.wait(timeout)
        self._event.clear()
        return woke

    def close(self) -> None:
        self._event.set()


class _LeaseKeeper:
    """Renews one job's lease every third of its length until stopped.

    A refused renewal means another worker reclaimed the job: renewing stops, and the
    fencing token then refuses this worker's completion or failure of it (the worker logs
    that; the new holder decides the job's fate)."""

    def __init__(self, engine: Engine, job: Job, lease_s: float) -> None:
        self._engine, self._job, self._lease_s = engine, job, lease_s
        self._stop = threading.Event()
        self._thread = threading.Thread(target=self._loop, name=f"lease-{job.id[:8]}", daemon=True)

    def __enter__(self) -> _LeaseKeeper:
        self._thread.start()
        return self

    def __exit__(self, *exc: object) -> None:
        self._stop.set()
        self._thread.join()

    def _loop(self) -> None:
        token = self._job.lease_token or ""
        while not self._stop.wait(self._lease_s / 3):
            try:
                alive = self._engine.run(
                    write(lambda: ops.heartbeat(self._job.id, token, now_micros(), self._lease_s))
                )
            except Exception:  # a passing database error: try again next beat
                log.warning("lease renewal failed for job %s", self._job.id, exc_info=True)
                continue
            if not alive:
                log.warning("job %s: its lease was lost; it is no longer renewed", self._job.id)
                return


class Worker(Generic[C]):
    """Claims and runs jobs of the registered kinds.

    ``run_pending()`` works through every ready job in the calling thread (tests,
    flushes); ``start()`` runs ``threads`` background threads until ``stop()``.
    """

    def __init__(
        self,
        engine: Engine,
        registry: JobRegistry[C],
        context: C,
        *,
        name: str | None = None,
        poll_s: float = 1.0,
        wakeup: Wakeup | None = None,
        backoff: Callable[[int], int] = ops.backoff_micros,
        after_job: Callable[[], object] | None = None,
    ) -> None:
        """``after_job`` runs when a handler returns or raises, before the job is marked
        (the usage ledger writes the job's model calls there)."""
        self._engine = engine
        self._after_job = after_job
        self._registry = registry
        self._context = context
        self.name = name or f"{socket.gethostname()}:{os.getpid()}:{id(self):x}"
        self._poll_s = poll_s
        self._wakeup = wakeup or LocalWakeup()
        self._backoff = backoff
        self._stop = threading.Event()
        self._threads: list[threading.Thread] = []
        self._started_at = now_micros()
        self._beat_at = float("-inf")  # monotonic time of the last heartbeat

    @property
    def wakeup(self) -> Wakeup:
        return self._wakeup

    def _claim(self, kinds: Sequence[str] | None) -> Job | None:
        known = self._registry.runnable(kinds)
        if not known:
            return None
        # Each kind is claimed with its own lease: a dead worker's job must come back after
        # its kind's lease, not after the longest lease of any kind this process handles.
        leases = {k: e.lease_s for k in known if (e := self._registry.get(k)) is not None}
        purposes = self._registry.purposes(known)
        low = [k for k in known if (e := self._registry.get(k)) is not None and e.low_priority]
        jobs = self._engine.run(
            write(
                lambda: ops.claim(
                    kinds=known,
                    worker=self.name,
                    now=now_micros(),
                    lease_s=leases,
                    purposes=purposes,
                    low=low,
                )
            )
        )
        return jobs[0] if jobs else None

    def _execute(self, job: Job) -> bool:
        # The request that queued the job names its logs too (and the jobs it queues).
        with bound_request_id(job.request_id):
            return self._execute_bound(job)

    def _execute_bound(self, job: Job) -> bool:
        entry = self._registry.get(job.kind)
        token = job.lease_token or ""
        if entry is None:  # pragma: no cover - claims only ask for registered kinds
            return False
        extra = {
            "job_id": job.id,
            "kind": job.kind,
            "attempt": job.attempts,
            "request_id": job.request_id,
        }
        log.info("job %s (%s) started", job.id, job.kind, extra=extra)
        try:
            try:
                with (
                    _LeaseKeeper(self._engine, job, entry.lease_s),
                    usage_scope(
                        job.tenant,
                        job.user,
                        job.agent,
                        purpose=self._registry.purpose(job.kind),
                        job_id=job.id,
                    ),
                ):
                    entry.handler(job, self._context)
            finally:
                if self._after_job is not None:
                    self._after_job()
        except Exception as exc:
            error = f"{type(exc).__name__}: {exc}\n{traceback.format_exc(limit=5)}"
            backoff = self._backoff(job.attempts)
            status = self._fail(job, token, error, backoff)
            log.warning(
                "job %s (%s) failed on attempt %d -> %s",
                job.id,
                job.kind,
                job.attempts,
                status,
                extra={**extra, "error": f"{type(exc).__name__}: {exc}"},
            )
            return True
        done = self._engine.run(write(lambda: ops.complete(job.id, token, now_micros())))
        if not done:
            log.warning("job %s finished after its lease was lost; its new holder decides", job.id)
        else:
            log.info("job %s (%s) done", job.id, job.kind, extra=extra)
        return True

    def _fail(self, job: Job, token: str, error: str, backoff: int) -> ops.JobStatus | None:
        """Mark the job failed. The error text is escaped to be storable; should the write
        still be refused, the failure is stored with the exception's type alone, so a
        job never stays running because its error could not be written."""
        try:
            return self._engine.run(
                write(lambda: ops.fail(job.id, token, error, now_micros(), backoff))
            )
        except Exception:
            log.warning("job %s: its error text could not be stored", job.id, exc_info=True)
            short = error.split(":", 1)[0][:100]
            return self._engine.run(
                write(
                    lambda: ops.fail(
                        job.id, token, f"{short} (error text not storable)", now_micros(), backoff
                    )
                )
            )

    def run_pending(self, kinds: Sequence[str] | None = None, max_jobs: int | None = None) -> int:
        """Run ready jobs in this thread until none is ready (or ``max_jobs`` ran)."""
        return self._drain(kinds, max_jobs, until=None)

    def _drain(
        self, kinds: Sequence[str] | None, max_jobs: int | None, until: threading.Event | None
    ) -> int:
        """Run ready jobs until none is ready, ``max_jobs`` ran or ``until`` is set (checked
        between jobs: a stopping worker finishes the job in hand and claims no more)."""
        ran = 0
        while (max_jobs is None or ran < max_jobs) and not (until is not None and until.is_set()):
            job = self._claim(kinds)
            if job is None:
                break
            self._execute(job)
            ran += 1
        return ran

    def _store_closed(self) -> bool:
        return self._engine.closed

    def heartbeat(self, force: bool = False) -> None:
        """Tell the store this worker is alive (at most every ``presence.BEAT_S``)."""
        now = time.monotonic()
        if not force and now - self._beat_at < presence.BEAT_S:
            return
        self._beat_at = now
        kinds = self._registry.kinds()
        self._engine.run(
            write(lambda: presence.seen(self.name, kinds, now_micros(), self._started_at))
        )

    def _loop(self) -> None:
        while not self._stop.is_set():
            if self._store_closed():  # closed under us: nothing left to do
                return
            try:
                self.heartbeat()
                ran = self._drain(None, 10, until=self._stop)
            except Exception:
                if self._store_closed():
                    return
                log.exception("worker %s: claiming failed; retrying after a pause", self.name)
                ran = 0
            if not ran and not self._stop.is_set():
                self._wakeup.wait(self._poll_s)

    def start(self, threads: int = 1) -> None:
        if self._threads:
            return
        self._stop.clear()
        for i in range(threads):
            t = threading.Thread(target=self._loop, name=f"memstrata-worker-{i}", daemon=True)
            t.start()
            self._threads.append(t)

    def stop(self, timeout: float | None = 30.0) -> None:
        """Let running jobs finish (up to ``timeout``), then return."""
        self._stop.set()
        self._wakeup.notify()
        for t in self._threads:
            t.join(timeout)
        if self._threads and not self._store_closed():
            try:
                self._engine.run(write(lambda: presence.forget(self.name)))
            except Exception:  # the row then ages out; nothing depends on it being gone
                log.debug("worker %s: could not remove its heartbeat", self.name, exc_info=True)
        self._threads.clear()

    @property
    def stopping(self) -> bool:
        """True once :meth:`stop` was called: the job in hand finishes, no other starts."""
        return self._stop.is_set()

    @property
    def running(self) -> bool:
        return any(t.is_alive() for t in self._threads)
