"""The periodic retention job: apply the stored policies, then come back."""

from __future__ import annotations

from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memstrata.api.core import Core

__all__ = ["RETENTION_JOB", "install", "retention_job"]

RETENTION_JOB = "memstrata.retention"


def retention_job(job: Any, memory: Any) -> None:
    """Job handler: apply the stored policies, then come back after the interval."""
    memory.retention.apply()
    interval = memory.core.settings.retention_interval_seconds
    if interval > 0 and memory.retention.policies():
        memory.retention.schedule(delay_s=interval)


def install(core: Core) -> None:
    """Register the job's handler (a run may take long: a long lease)."""
    core.jobs.register(RETENTION_JOB, retention_job, lease_s=600.0)
