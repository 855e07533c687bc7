"""A background job as the API returns it."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any

from memstrata.encoding import to_json

__all__ = ["Job", "JobStatus"]


class JobStatus(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    DONE = "done"
    DEAD = "dead"


@dataclass(frozen=True, slots=True)
class Job:
    id: str
    kind: str
    key: str | None
    tenant: str
    user: str | None
    agent: str | None
    conversation_id: str | None
    payload: dict[str, Any]
    flags: dict[str, bool]
    status: JobStatus
    attempts: int
    max_attempts: int
    run_after: datetime
    first_enqueued_at: datetime
    enqueue_count: int
    lease_token: str | None
    worker: str | None
    last_error: str | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    request_id: str | None = None

    def to_dict(self) -> dict[str, Any]:
        """The REST shape (no tenant, no worker's lease)."""
        return to_json(self)
