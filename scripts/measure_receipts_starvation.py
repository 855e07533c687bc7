"""Measure whether deletion receipts delay other tenants' jobs (issue 28, N1).

    python scripts/measure_receipts_starvation.py [--db sqlite:///... | postgresql://...] [--messages 20000]

One worker thread runs the store's jobs, as the embedded server's does. Three scenarios,
each followed by another tenant queueing a job, whose wait (queued to started) is timed:

- ``other_tenant_large``: another tenant holds ``--messages`` messages; a small tenant
  deletes 30 facts (each verified inline, over its own rows);
- ``owner_large``: the deleting user holds the messages, so the 30 verifications go to the
  tenant's one low-priority job, which yields to other work every half second;
- ``user_deletion``: a user deletion (a whole-store scan) on that store.

Prints one JSON object. Without ``--db`` a temporary SQLite file is used; on PostgreSQL
pass a URL whose search_path names an empty schema.
"""

from __future__ import annotations

import argparse
import json
import tempfile
import threading
import time
from pathlib import Path
from typing import Any

from memstrata import Memory, Scope
from memstrata.config import Settings
from memstrata.receipts.job import VERIFY_JOB

OTHER_KIND = "bench.other-tenant-work"


def _fill(mem: Memory, scope: Scope, n: int) -> None:
    cid = mem.conversations.create(scope).id
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        text = f"message {i}: the weather in town {i % 97} and a few more words of chat"
        mem.messages.append(scope, cid, role=role, content=text)


def _other_job_wait(mem: Memory, started: dict[str, float], tenant: str) -> float:
    """Queue another tenant's job now; seconds until the worker starts it."""
    event = threading.Event()
    started.clear()
    started["event"] = event  # type: ignore[assignment]
    queued = time.monotonic()
    mem.jobs.enqueue(Scope(tenant, "someone"), OTHER_KIND)
    if not event.wait(120):
        raise SystemExit("the other tenant's job never started")
    return round(started["at"] - queued, 4)


def _wait_verified(mem: Memory, scope: Scope, ids: list[str]) -> float:
    start = time.monotonic()
    while any(mem.receipts.get(scope, rid).verified is None for rid in ids):
        time.sleep(0.05)
    return round(time.monotonic() - start, 4)


def _deletions(mem: Memory, scope: Scope, n: int = 30) -> tuple[list[str], float]:
    facts = [mem.facts.add(scope, f"fact number {i}").id for i in range(n)]
    took = []
    ids = []
    for fid in facts:
        t = time.monotonic()
        ids.append(mem.facts.delete(scope, fid).id)
        took.append(time.monotonic() - t)
    return ids, round(max(took), 4)


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--db", default=None)
    ap.add_argument("--messages", type=int, default=20_000)
    args = ap.parse_args()
    home = Path(tempfile.mkdtemp(prefix="memstrata-receipts-"))
    url = args.db or f"sqlite:///{home / 'store.db'}"
    mem = Memory.open(url, settings=Settings(home=home, worker="off"))
    started: dict[str, Any] = {}

    def other_work(job: Any, memory: Any) -> None:
        started["at"] = time.monotonic()
        started["event"].set()

    mem.jobs.register(OTHER_KIND, other_work)
    worker = mem.core.worker()
    worker.start(threads=1)
    out: dict[str, Any] = {"db": mem.core.engine.dialect, "messages": args.messages}
    try:
        big = Scope("big-tenant", "holder")
        _fill(mem, big, args.messages)

        small = Scope("deleting-tenant", "small")
        ids, slowest = _deletions(mem, small)
        out["other_tenant_large"] = {
            "slowest_deletion_s": slowest,
            "verify_jobs_queued": len(mem.jobs.list(tenant="deleting-tenant").items),
            "other_job_wait_s": _other_job_wait(mem, started, "third-tenant"),
            "all_verified_after_s": _wait_verified(mem, small, ids),
        }

        # The same owner deletes now: its size sends the scans to its tenant's job.
        ids, slowest = _deletions(mem, big)
        out["owner_large"] = {
            "slowest_deletion_s": slowest,
            "verify_jobs_queued": len(
                [j for j in mem.jobs.list(tenant="big-tenant").items if j.kind == VERIFY_JOB]
            ),
            "other_job_wait_s": _other_job_wait(mem, started, "third-tenant"),
            "all_verified_after_s": _wait_verified(mem, big, ids),
        }

        victim = Scope("big-tenant", "victim")
        _fill(mem, victim, 10)
        t = time.monotonic()
        receipt = mem.users.delete(victim).receipt
        deletion = round(time.monotonic() - t, 4)
        out["user_deletion"] = {
            "deletion_s": deletion,
            "other_job_wait_s": _other_job_wait(mem, started, "third-tenant"),
            "verified_after_s": _wait_verified(mem, Scope("big-tenant", "victim"), [])
            if receipt.verified is not None
            else None,
        }
        waits = [v["other_job_wait_s"] for v in out.values() if isinstance(v, dict)]
        out["max_other_job_wait_s"] = max(waits)
    finally:
        worker.stop()
        mem.close()
    print(json.dumps(out, indent=2))


if __name__ == "__main__":
    main()
