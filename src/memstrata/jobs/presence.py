"""Worker presence: each worker heartbeats into the store, so anyone can tell when jobs
are due and nobody is running them (sans-IO operations on the ``workers`` table).

A running worker writes its row at start and then every ``BEAT_S`` seconds, and deletes
it when it stops cleanly; a killed worker's row simply ages. Jobs are *unattended* when
some are due and no worker has been seen for ``STALE_S`` seconds: ``/v1/jobs``,
``/readyz``, ``memstrata doctor``, the web UI and the ``serve`` log then say so.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

from memstrata.storage.plan import Exec, Op, Query

__all__ = ["BEAT_S", "STALE_S", "Presence", "forget", "presence", "seen"]

_S = 1_000_000
#: How often a running worker writes its heartbeat.
BEAT_S = 10.0
#: How long without a heartbeat before due jobs count as unattended.
STALE_S = 60.0


@dataclass(frozen=True, slots=True)
class Presence:
    """Due jobs and the last sign of a worker, at ``now``."""

    due: int  # queued jobs whose time has come
    oldest_due_s: float  # how long the oldest of them has waited
    live_workers: int  # workers seen within STALE_S
    last_seen_s: float | None  # seconds since any worker was last seen (None: never)

    @property
    def warning(self) -> str | None:
        """One line for people when due jobs have no worker, else None."""
        if self.due == 0 or self.live_workers > 0:
            return None
        since = (
            "no worker has run on this store"
            if self.last_seen_s is None
            else f"no worker seen for {_ago(self.last_seen_s)}"
        )
        return (
            f"{self.due} job(s) due (oldest waiting {_ago(self.oldest_due_s)}) and {since}: "
            "start one with `memstrata worker` (`memstrata serve` runs one unless --no-worker)"
        )

    def to_dict(self) -> dict[str, object]:
        return {
            "due": self.due,
            "oldest_due_s": round(self.oldest_due_s, 1),
            "live_workers": self.live_workers,
            "last_seen_s": None if self.last_seen_s is None else round(self.last_seen_s, 1),
            "warning": self.warning,
        }


def _ago(seconds: float) -> str:
    if seconds < 120:
        return f"{seconds:.0f} s"
    if seconds < 7200:
        return f"{seconds / 60:.0f} min"
    return f"{seconds / 3600:.1f} h"


def seen(name: str, kinds: Sequence[str], now: int, started: int) -> Op[None]:
    """Record that worker ``name`` is alive now (insert or refresh its row)."""
    updated = yield Exec(
        "UPDATE workers SET seen_at = ?, kinds = ? WHERE name = ?", (now, ",".join(kinds), name)
    )
    if not updated:
        yield Exec(
            "INSERT INTO workers (name, kinds, started_at, seen_at) VALUES (?, ?, ?, ?)",
            (name, ",".join(kinds), started, now),
        )


def forget(name: str) -> Op[None]:
    """A worker that stops cleanly removes its row."""
    yield Exec("DELETE FROM workers WHERE name = ?", (name,))


def presence(
    now: int, *, tenant: str | None = None, user: str | None = None, stale_s: float = STALE_S
) -> Op[Presence]:
    """Due jobs (all, one tenant's or one user's) and the workers seen lately."""
    where = "status = 'queued' AND run_after <= ?"
    params: list[object] = [now]
    if tenant is not None:
        where += " AND tenant_id = ?"
        params.append(tenant)
    if user is not None:
        where += " AND user_id = ?"
        params.append(user)
    due = yield Query(f"SELECT count(*), min(run_after) FROM jobs WHERE {where}", params)
    count = int(due[0][0]) if due else 0
    oldest = 0.0 if not count or due[0][1] is None else (now - int(due[0][1])) / _S
    rows = yield Query(
        "SELECT count(*) FROM workers WHERE seen_at >= ?",
        (now - int(stale_s * _S),),
    )
    live = int(rows[0][0]) if rows else 0
    last = yield Query("SELECT max(seen_at) FROM workers")
    last_seen = None if not last or last[0][0] is None else max(0.0, (now - int(last[0][0])) / _S)
    return Presence(count, max(0.0, oldest), live, last_seen)
