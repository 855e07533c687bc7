"""``mem.facts``, ``mem.longterm``, ``mem.jobs`` and ``mem.users`` over HTTP.

``_sync_longterm.py`` is generated from this file by ``scripts/unasync.py``.
"""

from __future__ import annotations

import builtins
from datetime import datetime
from typing import Any, TypeVar

from memstrata.client import _decode as decode
from memstrata.client._async_receipts import receipt_of
from memstrata.client._async_session import AsyncSession, conversation_path, query_params
from memstrata.client._wire import check_tenant, iso_time, owner_headers, segment
from memstrata.domain.jobs import Job
from memstrata.domain.longterm import Fact, FactEvent, ProfileSection
from memstrata.domain.receipts import Receipt, UserDeleted
from memstrata.errors import InvalidInput
from memstrata.types import Page, Scope

__all__ = ["AsyncRemoteFacts", "AsyncRemoteJobs", "AsyncRemoteLongTerm", "AsyncRemoteUsers"]

T = TypeVar("T")


class AsyncRemoteFacts:
    """``mem.facts`` over HTTP."""

    def __init__(self, session: AsyncSession) -> None:
        self._s = session

    async def list(
        self,
        scope: Scope,
        *,
        status: str | None = "active",
        category: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        as_of: datetime | str | None = None,
        known_at: datetime | str | None = None,
    ) -> Page[Fact]:
        """Newest first; ``status`` None means every status, as embedded. ``as_of`` and
        ``known_at``: the facts true then, as known then (see ``mem.facts.list``)."""
        h = await self._s.scoped(scope)
        params = query_params(
            status=status or "all",
            category=category,
            limit=limit,
            cursor=cursor,
            as_of=iso_time(as_of, "as_of"),
            known_at=iso_time(known_at, "known_at"),
        )
        return await self._s.get("/v1/facts", decode.page(decode.fact), h, params)

    async def add(
        self,
        scope: Scope,
        content: str,
        *,
        category: str = "context",
        confidence: float = 1.0,
        source_error: str | None = None,
    ) -> Fact:
        h = await self._s.scoped(scope)
        body = query_params(
            content=content, category=category, confidence=confidence, source_error=source_error
        )
        return await self._s.call("POST", "/v1/facts", decode.fact, headers=h, json=body)

    async def get(self, scope: Scope, fact_id: str) -> Fact:
        h = await self._s.scoped(scope)
        return await self._s.get(f"/v1/facts/{segment(fact_id)}", decode.fact, h)

    async def edit(self, scope: Scope, fact_id: str, **changes: Any) -> Fact:
        if not changes:
            raise InvalidInput("nothing to change", field="content")
        h = await self._s.scoped(scope)
        path = f"/v1/facts/{segment(fact_id)}"
        return await self._s.call("PATCH", path, decode.fact, headers=h, json=changes)

    async def delete(self, scope: Scope, fact_id: str) -> Receipt:
        h = await self._s.scoped(scope)
        r = await self._s.send("DELETE", f"/v1/facts/{segment(fact_id)}", headers=h)
        return await receipt_of(self._s, r, h)

    async def history(self, scope: Scope, fact_id: str) -> builtins.list[FactEvent]:
        h = await self._s.scoped(scope)
        path = f"/v1/facts/{segment(fact_id)}/history"
        return await self._s.get(path, decode.items(decode.fact_event), h)


class AsyncRemoteLongTerm:
    """``mem.longterm`` over HTTP (the profile; extraction runs on the server)."""

    def __init__(self, session: AsyncSession) -> None:
        self._s = session

    async def profile(
        self,
        scope: Scope,
        *,
        as_of: datetime | str | None = None,
        known_at: datetime | str | None = None,
    ) -> list[ProfileSection]:
        h = await self._s.scoped(scope)
        params = query_params(
            as_of=iso_time(as_of, "as_of"), known_at=iso_time(known_at, "known_at")
        )
        return await self._s.get("/v1/profile", decode.profile, h, params)

    async def observe(
        self, scope: Scope, conversation_id: str, *, leaf_id: str | None = None
    ) -> Job:
        """Queue (or push back) the conversation's extraction on the server; the job."""
        h = await self._s.scoped(scope)
        job_of = decode.job(scope.tenant)
        # Queueing merges by key on the server, so sending it again is harmless.
        return await self._s.call(
            "POST",
            f"{conversation_path(conversation_id)}/observe",
            lambda d: job_of(d["job"]),
            headers=h,
            json=query_params(leaf_id=leaf_id),
            idempotent=True,
        )


class AsyncRemoteJobs:
    """``mem.jobs`` over HTTP: a user key sees its jobs, an admin key its tenant's."""

    def __init__(self, session: AsyncSession) -> None:
        self._s = session

    async def _owner(self, tenant: str | None, user: str | None) -> tuple[str, dict[str, str]]:
        me = await self._s.identity()
        return me.tenant, owner_headers(me, tenant, user)

    async def list(
        self,
        *,
        tenant: str | None = None,
        user: str | None = None,
        status: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[Job]:
        """Newest first: the key's tenant (or ``user``); another tenant is Forbidden."""
        t, h = await self._owner(tenant, user)
        params = query_params(status=status, limit=limit, cursor=cursor)
        return await self._s.get("/v1/jobs", decode.page(decode.job(t)), h, params)

    async def get(self, job_id: str, *, tenant: str | None = None, user: str | None = None) -> Job:
        t, h = await self._owner(tenant, user)
        return await self._s.get(f"/v1/jobs/{segment(job_id)}", decode.job(t), h)

    async def retry(self, job_id: str, *, tenant: str | None = None) -> Job:
        """Send a dead job back to the queue."""
        t, h = await self._owner(tenant, None)
        path = f"/v1/jobs/{segment(job_id)}/retry"
        return await self._s.call("POST", path, decode.job(t), headers=h)


class AsyncRemoteUsers:
    """``mem.users`` over HTTP (admin keys)."""

    def __init__(self, session: AsyncSession) -> None:
        self._s = session

    async def list(
        self, tenant: str, *, limit: int | None = None, cursor: str | None = None
    ) -> Page[tuple[str, datetime]]:
        check_tenant(await self._s.identity(), tenant)
        params = query_params(limit=limit, cursor=cursor)
        return await self._s.get("/v1/users", decode.page(decode.user), {}, params)

    async def delete(self, scope: Scope) -> UserDeleted:
        """Delete ``scope.user`` and everything it owns: the conversations removed, carrying
        the deletion's receipt (as embedded)."""
        check_tenant(await self._s.identity(), scope.tenant)
        r = await self._s.send("DELETE", f"/v1/users/{segment(scope.user)}", headers={})
        receipt = await receipt_of(self._s, r, {})
        return UserDeleted(len(receipt.subject_ids) - 1, receipt)
