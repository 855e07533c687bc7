"""Agent state as the API returns it: working memory, plans, iterations, checkpoints and
run snapshots."""

from __future__ import annotations

import json
from dataclasses import dataclass
from datetime import datetime
from typing import Any, Literal

from memstrata.encoding import to_json

__all__ = ["Checkpoint", "Format", "Iteration", "PlanDoc", "RunSnapshot", "WorkingMemory"]


Format = Literal["markdown", "json"]


@dataclass(frozen=True, slots=True)
class WorkingMemory:
    """One working-memory document: the user's (``conversation_id`` None) or one conversation's."""

    conversation_id: str | None
    format: Format
    content: Any  # str for markdown, a JSON value for json
    json_schema: dict[str, Any] | None
    template: Any
    version: int
    updated_at: datetime

    @property
    def text(self) -> str:
        """The document as injected into a prompt."""
        if self.format == "markdown":
            return str(self.content)
        return json.dumps(self.content, ensure_ascii=False, indent=2, sort_keys=True)

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)


@dataclass(frozen=True, slots=True)
class PlanDoc:
    conversation_id: str
    document: Any
    version: int
    updated_at: datetime

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)


@dataclass(frozen=True, slots=True)
class Iteration:
    """One attempt at a task (append-only)."""

    seq: int
    conversation_id: str
    task: str
    attempt: int
    outcome: str
    error: str | None
    detail: dict[str, Any]
    created_at: datetime

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)


@dataclass(frozen=True, slots=True)
class Checkpoint:
    """Suspended agent state keyed ``name:run_id``."""

    name: str
    run_id: str
    conversation_id: str | None
    state: Any
    expires_at: datetime | None
    created_at: datetime
    updated_at: datetime

    @property
    def key(self) -> str:
        return f"{self.name}:{self.run_id}"

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)


@dataclass(frozen=True, slots=True)
class RunSnapshot:
    conversation_id: str
    run_id: str
    data: Any
    created_at: datetime
    updated_at: datetime

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)
