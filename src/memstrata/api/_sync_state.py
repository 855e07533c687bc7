"""Generated from ``_async_state.py`` by ``scripts/unasync.py``: do not edit."""

from __future__ import annotations

from typing import Any

from memstrata import state as ops
from memstrata.api._sync_base import SubAPI
from memstrata.state import Checkpoint, Format, Iteration, PlanDoc, RunSnapshot, WorkingMemory
from memstrata.types import Page, Scope
from memstrata.validation import checked_scope as _scope

__all__ = ["Checkpoints", "Iterations", "Plans", "Snapshots", "Working"]


class Working(SubAPI):
    """Working memory: one document per user, or per conversation (``conversation_id``)."""

    def get(self, scope: Scope, *, conversation_id: str | None = None) -> WorkingMemory:
        return self._read(ops.get_working_memory, _scope(scope), conversation_id)

    def put(
        self,
        scope: Scope,
        content: Any,
        *,
        conversation_id: str | None = None,
        format: Format | None = None,
        json_schema: dict[str, Any] | None = None,
        template: Any = None,
        expected_version: int | None = None,
    ) -> WorkingMemory:
        """Write the document (markdown text, or JSON checked against the schema/template).

        Without ``format``, a string is markdown and any other value json."""
        rt = self._core.rt
        return self._write(
            ops.put_working_memory,
            rt,
            _scope(scope),
            content,
            conversation_id=conversation_id,
            format=format,
            json_schema=json_schema,
            template=template,
            expected_version=expected_version,
        )

    def delete(self, scope: Scope, *, conversation_id: str | None = None) -> None:
        self._write(ops.delete_working_memory, _scope(scope), conversation_id)


class Plans(SubAPI):
    """The plan of a conversation: a versioned JSON document."""

    def get(self, scope: Scope, conversation_id: str) -> PlanDoc:
        return self._read(ops.get_plan, _scope(scope), conversation_id)

    def put(
        self,
        scope: Scope,
        conversation_id: str,
        document: Any,
        *,
        expected_version: int | None = None,
    ) -> PlanDoc:
        rt = self._core.rt
        return self._write(
            ops.put_plan,
            rt,
            _scope(scope),
            conversation_id,
            document,
            expected_version=expected_version,
        )


class Iterations(SubAPI):
    """Append-only logs of task attempts, per conversation and task."""

    def append(
        self,
        scope: Scope,
        conversation_id: str,
        task: str,
        *,
        outcome: str,
        error: str | None = None,
        attempt: int | None = None,
        detail: dict[str, Any] | None = None,
    ) -> Iteration:
        rt = self._core.rt
        return self._write(
            ops.append_iteration,
            rt,
            _scope(scope),
            conversation_id,
            task,
            outcome=outcome,
            error=error,
            attempt=attempt,
            detail=detail,
        )

    def list(
        self,
        scope: Scope,
        conversation_id: str,
        *,
        task: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[Iteration]:
        """Oldest first."""
        rt = self._core.rt
        return self._read(
            ops.list_iterations,
            rt,
            _scope(scope),
            conversation_id,
            task=task,
            limit=limit,
            cursor=cursor,
        )


class Checkpoints(SubAPI):
    """Suspended agent state keyed ``name:run_id``; reading an expired one raises Expired."""

    def save(
        self,
        scope: Scope,
        name: str,
        run_id: str,
        state: Any,
        *,
        ttl_s: float | None = None,
        conversation_id: str | None = None,
    ) -> Checkpoint:
        rt = self._core.rt
        return self._write(
            ops.save_checkpoint,
            rt,
            _scope(scope),
            name,
            run_id,
            state,
            ttl_s=ttl_s,
            conversation_id=conversation_id,
        )

    def load(self, scope: Scope, name: str, run_id: str) -> Checkpoint:
        rt = self._core.rt
        return self._read(ops.load_checkpoint, rt, _scope(scope), name, run_id)

    def delete(self, scope: Scope, name: str, run_id: str) -> None:
        """Expire the checkpoint: later loads raise Expired ("This action has expired ...")."""
        rt = self._core.rt
        self._write(ops.delete_checkpoint, rt, _scope(scope), name, run_id)


class Snapshots(SubAPI):
    """Opaque per-run snapshots a UI keeps to restore its view after a reconnect."""

    def get(self, scope: Scope, conversation_id: str, run_id: str) -> RunSnapshot:
        return self._read(ops.get_snapshot, _scope(scope), conversation_id, run_id)

    def put(self, scope: Scope, conversation_id: str, run_id: str, data: Any) -> RunSnapshot:
        rt = self._core.rt
        return self._write(ops.put_snapshot, rt, _scope(scope), conversation_id, run_id, data)
