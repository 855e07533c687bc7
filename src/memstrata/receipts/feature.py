"""What deletion receipts add to an opened memory: the job that verifies receipts too
large to verify inside the deleting call."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memstrata.receipts.job import VERIFY_JOB

if TYPE_CHECKING:
    from memstrata.api.core import Core, JobContext
    from memstrata.jobs.worker import Handler

__all__ = ["install"]


def install(core: Core, run: Handler[JobContext]) -> None:
    """Register ``run`` (the facade's verification) for the kind: a long lease (a user
    deletion's scan reads every table), and a low priority (users' jobs go first)."""
    core.jobs.register(VERIFY_JOB, run, lease_s=600.0, low_priority=True)
