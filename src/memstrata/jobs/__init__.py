"""The one durable job system: debounced, leased, retried, dead-lettered."""

from memstrata.jobs.ops import Job, JobStatus
from memstrata.jobs.worker import JobRegistry, LocalWakeup, Wakeup, Worker

__all__ = ["Job", "JobRegistry", "JobStatus", "LocalWakeup", "Wakeup", "Worker"]
