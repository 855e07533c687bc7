"""Wire models of agent state: plan, iterations, run snapshots, checkpoints, working memory."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import BaseModel

from memstrata.domain.state import (
    Checkpoint,
    Format,
    Iteration,
    PlanDoc,
    RunSnapshot,
    WorkingMemory,
)
from memstrata.wire._codec import Derived, Wire

__all__ = [
    "CheckpointOut",
    "IterationOut",
    "IterationPage",
    "PlanOut",
    "SnapshotOut",
    "WorkingMemoryOut",
]


class PlanOut(Wire):
    __domain__ = PlanDoc

    conversation_id: str
    document: Any
    version: int
    updated_at: datetime


class IterationOut(Wire):
    __domain__ = Iteration

    seq: int
    conversation_id: str
    task: str
    attempt: int
    outcome: str
    error: str | None
    detail: dict[str, Any]
    created_at: datetime


class IterationPage(BaseModel):
    items: list[IterationOut]
    next_cursor: str | None


class CheckpointOut(Wire):
    __domain__ = Checkpoint

    key: str  # name:run_id (a property of the checkpoint, not rebuilt)
    name: str
    run_id: str
    conversation_id: str | None
    state: Any
    expires_at: datetime | None
    created_at: datetime
    updated_at: datetime


class SnapshotOut(Wire):
    __domain__ = RunSnapshot

    conversation_id: str
    run_id: str
    data: Any
    created_at: datetime
    updated_at: datetime


def _wm_scope(doc: WorkingMemory) -> str:
    return "user" if doc.conversation_id is None else "conversation"


class WorkingMemoryOut(Wire):
    __domain__ = WorkingMemory

    scope: Annotated[str, Derived(_wm_scope)]
    conversation_id: str | None
    format: Format
    content: Any
    json_schema: dict[str, Any] | None
    template: Any
    version: int
    updated_at: datetime
