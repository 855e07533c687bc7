"""Wire model of background jobs."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel, Field
from pydantic.json_schema import SkipJsonSchema

from memstrata.domain.jobs import Job
from memstrata.wire._codec import Wire

__all__ = ["JobAnswer", "JobOut", "JobPage"]


class JobOut(Wire):
    # A job as a tenant sees it: no tenant, no worker's lease.

    __domain__ = Job

    id: str
    kind: str
    key: str | None
    user: str | None
    agent: str | None
    conversation_id: str | None
    payload: dict[str, Any]
    flags: dict[str, bool]
    status: str = Field(description="queued, running, done or dead.")
    attempts: int
    max_attempts: int
    run_after: datetime
    first_enqueued_at: datetime
    enqueue_count: int = Field(description="How many enqueues were merged into this job.")
    last_error: str | None
    created_at: datetime
    updated_at: datetime
    finished_at: datetime | None
    # Sent, but not in the published schema (which predates it).
    request_id: Annotated[SkipJsonSchema[str | None], Field()] = None
    blocked: str | None = Field(
        default=None,
        description="Why a queued job cannot run yet (e.g. extraction needs an LLM; `budget`: "
        "its tenant used up today's (UTC) token budget of its purpose); it waits.",
    )


class JobAnswer(BaseModel):
    job: JobOut


class JobPage(BaseModel):
    items: list[JobOut]
    next_cursor: str | None
    worker_warning: str | None = Field(
        default=None,
        description="Set when some of these jobs are due and no worker has been seen lately "
        "(nothing will run them until one starts): one line saying what to start.",
    )
