"""The ``receipts.verify`` job: the verification scans of a tenant's receipts that were
too large to run inside the deleting call.

One job per tenant: a deletion queues the tenant's job (merged into the queued one, so a
tenant never has more than one waiting), and a run verifies the tenant's receipts still
unverified, oldest first, at most :data:`PER_RUN` of them and for about
:data:`BUDGET_S` seconds, queueing itself again when more wait. The kind is of low
priority: a worker claims it only when no other ready job waits, so users' jobs wait at
most for the end of the current run (one scan past the budget).
"""

from __future__ import annotations

__all__ = ["BUDGET_S", "PER_RUN", "VERIFY_JOB", "job_key"]

VERIFY_JOB = "receipts.verify"
#: Receipts one run verifies before it queues the rest (each scan is bounded by its owner).
PER_RUN = 50
#: Seconds of scanning one run does before it queues the rest (users' jobs go in between).
BUDGET_S = 0.5


def job_key(tenant: str) -> str:
    """The tenant's one verification job."""
    return f"receipts:{tenant}"
