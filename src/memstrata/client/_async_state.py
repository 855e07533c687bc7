"""Agent state over HTTP: working memory, plans, iterations, checkpoints, run snapshots.

``_sync_state.py`` is generated from this file by ``scripts/unasync.py``.
"""

from __future__ import annotations

from typing import Any, TypeVar

from memstrata.client import _decode as decode
from memstrata.client._async_session import AsyncSession, conversation_path, query_params
from memstrata.client._wire import segment, version_headers
from memstrata.domain.state import (
    Checkpoint,
    Format,
    Iteration,
    PlanDoc,
    RunSnapshot,
    WorkingMemory,
)
from memstrata.types import Page, Scope

__all__ = [
    "AsyncRemoteCheckpoints",
    "AsyncRemoteIterations",
    "AsyncRemotePlans",
    "AsyncRemoteSnapshots",
    "AsyncRemoteWorking",
]

T = TypeVar("T")


class AsyncRemoteWorking:
    """``mem.working`` over HTTP; ``expected_version`` becomes ``If-Match``."""

    def __init__(self, session: AsyncSession) -> None:
        self._s = session

    async def get(self, scope: Scope, *, conversation_id: str | None = None) -> WorkingMemory:
        h = await self._s.scoped(scope)
        params = query_params(conversation_id=conversation_id)
        return await self._s.get("/v1/working-memory", decode.working, h, params)

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
        h = {**await self._s.scoped(scope), **version_headers(expected_version)}
        body = {"content": content, **query_params(format=format, json_schema=json_schema)}
        if template is not None:
            body["template"] = template
        return await self._s.call(
            "PUT",
            "/v1/working-memory",
            decode.working,
            headers=h,
            params=query_params(conversation_id=conversation_id),
            json=body,
        )


class AsyncRemotePlans:
    """``mem.plans`` over HTTP."""

    def __init__(self, session: AsyncSession) -> None:
        self._s = session

    async def get(self, scope: Scope, conversation_id: str) -> PlanDoc:
        h = await self._s.scoped(scope)
        return await self._s.get(f"{conversation_path(conversation_id)}/plan", decode.plan, h)

    async def put(
        self,
        scope: Scope,
        conversation_id: str,
        document: Any,
        *,
        expected_version: int | None = None,
    ) -> PlanDoc:
        h = {**await self._s.scoped(scope), **version_headers(expected_version)}
        path = f"{conversation_path(conversation_id)}/plan"
        return await self._s.call("PUT", path, decode.plan, headers=h, json={"document": document})


class AsyncRemoteIterations:
    """``mem.iterations`` over HTTP."""

    def __init__(self, session: AsyncSession) -> None:
        self._s = session

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
        h = await self._s.scoped(scope)
        body = query_params(task=task, outcome=outcome, error=error, attempt=attempt, detail=detail)
        path = f"{conversation_path(conversation_id)}/iterations"
        return await self._s.call("POST", path, decode.iteration, headers=h, json=body)

    async def list(
        self,
        scope: Scope,
        conversation_id: str,
        *,
        task: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[Iteration]:
        h = await self._s.scoped(scope)
        params = query_params(task=task, limit=limit, cursor=cursor)
        path = f"{conversation_path(conversation_id)}/iterations"
        return await self._s.get(path, decode.page(decode.iteration), h, params)


class AsyncRemoteCheckpoints:
    """``mem.checkpoints`` over HTTP."""

    def __init__(self, session: AsyncSession) -> None:
        self._s = session

    @staticmethod
    def _path(name: str, run_id: str) -> str:
        return f"/v1/checkpoints/{segment(name)}/{segment(run_id)}"

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
        h = await self._s.scoped(scope)
        body = {"state": state, **query_params(ttl_s=ttl_s, conversation_id=conversation_id)}
        path = self._path(name, run_id)
        return await self._s.call("PUT", path, decode.checkpoint, headers=h, json=body)

    async def load(self, scope: Scope, name: str, run_id: str) -> Checkpoint:
        h = await self._s.scoped(scope)
        return await self._s.get(self._path(name, run_id), decode.checkpoint, h)

    async def delete(self, scope: Scope, name: str, run_id: str) -> None:
        h = await self._s.scoped(scope)
        await self._s.send("DELETE", self._path(name, run_id), headers=h)


class AsyncRemoteSnapshots:
    """``mem.snapshots`` over HTTP."""

    def __init__(self, session: AsyncSession) -> None:
        self._s = session

    @staticmethod
    def _path(conversation_id: str, run_id: str) -> str:
        return f"{conversation_path(conversation_id)}/runs/{segment(run_id)}/snapshot"

    async def get(self, scope: Scope, conversation_id: str, run_id: str) -> RunSnapshot:
        h = await self._s.scoped(scope)
        return await self._s.get(self._path(conversation_id, run_id), decode.snapshot, h)

    async def put(self, scope: Scope, conversation_id: str, run_id: str, data: Any) -> RunSnapshot:
        h = await self._s.scoped(scope)
        path = self._path(conversation_id, run_id)
        return await self._s.call("PUT", path, decode.snapshot, headers=h, json={"data": data})
