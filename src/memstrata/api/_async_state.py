"""Agent-state sub-APIs of the async facade (``_sync_state.py`` is generated from it).

``mem.working`` (working memory), ``mem.plans``, ``mem.iterations``,
``mem.checkpoints`` and ``mem.snapshots``. Versioned documents take
``expected_version`` for compare-and-set: a stale one raises
:class:`~memstrata.errors.PreconditionFailed`.
"""

from __future__ import annotations

from typing import Any

from memstrata import state as ops
from memstrata.api._async_base import AsyncSubAPI
from memstrata.state import Checkpoint, Format, Iteration, PlanDoc, RunSnapshot, WorkingMemory
from memstrata.types import Page, Scope
from memstrata.validation import checked_scope as _scope

__all__ = ["AsyncCheckpoints", "AsyncIterations", "AsyncPlans", "AsyncSnapshots", "AsyncWorking"]


class AsyncWorking(AsyncSubAPI):
    """Working memory: one document per user, or per conversation (``conversation_id``)."""

    async def get(self, scope: Scope, *, conversation_id: str | None = None) -> WorkingMemory:
        return await self._read(ops.get_working_memory, _scope(scope), conversation_id)

    async def put(
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
        return await self._write(
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

    async def delete(self, scope: Scope, *, conversation_id: str | None = None) -> None:
        await self._write(ops.delete_working_memory, _scope(scope), conversation_id)


class AsyncPlans(AsyncSubAPI):
    """The plan of a conversation: a versioned JSON document."""

    async def get(self, scope: Scope, conversation_id: str) -> PlanDoc:
        return await self._read(ops.get_plan, _scope(scope), conversation_id)

    async def put(
        self,
        scope: Scope,
        conversation_id: str,
        document: Any,
        *,
        expected_version: int | None = None,
    ) -> PlanDoc:
        rt = self._core.rt
        return await self._write(
            ops.put_plan,
            rt,
            _scope(scope),
            conversation_id,
            document,
            expected_version=expected_version,
        )


class AsyncIterations(AsyncSubAPI):
    """Append-only logs of task attempts, per conversation and task."""

    async def append(
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
        return await self._write(
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

    async def list(
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
        return await self._read(
            ops.list_iterations,
            rt,
            _scope(scope),
            conversation_id,
            task=task,
            limit=limit,
            cursor=cursor,
        )


class AsyncCheckpoints(AsyncSubAPI):
    """Suspended agent state keyed ``name:run_id``; reading an expired one raises Expired."""

    async def save(
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
        return await self._write(
            ops.save_checkpoint,
            rt,
            _scope(scope),
            name,
            run_id,
            state,
            ttl_s=ttl_s,
            conversation_id=conversation_id,
        )

    async def load(self, scope: Scope, name: str, run_id: str) -> Checkpoint:
        rt = self._core.rt
        return await self._read(ops.load_checkpoint, rt, _scope(scope), name, run_id)

    async def delete(self, scope: Scope, name: str, run_id: str) -> None:
        """Expire the checkpoint: later loads raise Expired ("This action has expired ...")."""
        rt = self._core.rt
        await self._write(ops.delete_checkpoint, rt, _scope(scope), name, run_id)


class AsyncSnapshots(AsyncSubAPI):
    """Opaque per-run snapshots a UI keeps to restore its view after a reconnect."""

    async def get(self, scope: Scope, conversation_id: str, run_id: str) -> RunSnapshot:
        return await self._read(ops.get_snapshot, _scope(scope), conversation_id, run_id)

    async def put(self, scope: Scope, conversation_id: str, run_id: str, data: Any) -> RunSnapshot:
        rt = self._core.rt
        return await self._write(ops.put_snapshot, rt, _scope(scope), conversation_id, run_id, data)
