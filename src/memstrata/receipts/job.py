"""The ``receipts.verify`` job: a receipt's verification scan, run by a worker when the store
is too large to scan inside the deleting call."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

from memstrata.errors import NotFound

if TYPE_CHECKING:
    from memstrata.api.core import Core

__all__ = ["VERIFY_JOB", "install", "verify_job"]

VERIFY_JOB = "receipts.verify"


def verify_job(job: Any, memory: Any) -> None:
    """Job handler: scan for what the receipt's deletion removed, store the verdict."""
    try:
        memory.receipts.verify(job.tenant, str(job.payload["receipt_id"]))
    except NotFound:
        return  # retention removed the receipt first: nothing to verify


def install(core: Core) -> None:
    """Register the handler (a scan reads every table: a long lease)."""
    core.jobs.register(VERIFY_JOB, verify_job, lease_s=600.0)
