"""What retention adds to an opened memory: the periodic job that applies the policies."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memstrata.retention.job import RETENTION_JOB

if TYPE_CHECKING:
    from memstrata.api.core import Core, JobContext
    from memstrata.jobs.worker import Handler

__all__ = ["install"]


def install(core: Core, run: Handler[JobContext]) -> None:
    """Register ``run`` (the facade's retention job) for the kind: a run may take long,
    so a long lease."""
    core.jobs.register(RETENTION_JOB, run, lease_s=600.0)
