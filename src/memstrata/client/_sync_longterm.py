"""Generated from ``_async_longterm.py`` by ``scripts/unasync.py``: do not edit."""

from __future__ import annotations

import builtins
from datetime import datetime
from typing import Any, TypeVar

from memstrata.client import _decode as decode
from memstrata.client._sync_receipts import receipt_of
from memstrata.client._sync_session import Session, conversation_path, query_params
from memstrata.client._wire import check_tenant, iso_time, owner_headers, segment
from memstrata.domain.jobs import Job
from memstrata.domain.longterm import Fact, FactEvent, ProfileSection
from memstrata.domain.receipts import Receipt, UserDeleted
from memstrata.errors import InvalidInput
from memstrata.types import Page, Scope

__all__ = ["RemoteFacts", "RemoteJobs", "RemoteLongTerm", "RemoteUsers"]

T = TypeVar("T")


class RemoteFacts:
    """``mem.facts`` over HTTP."""

    def __init__(self, session: Session) -> None:
        self._s = session

    def list(
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
        h = self._s.scoped(scope)
        params = query_params(
            status=status or "all",
            category=category,
            limit=limit,
            cursor=cursor,
            as_of=iso_time(as_of, "as_of"),
            known_at=iso_time(known_at, "known_at"),
        )
        return self._s.get("/v1/facts", decode.page(decode.fact), h, params)

    def add(
        self,
        scope: Scope,
        content: str,
        *,
        category: str = "context",
        confidence: float = 1.0,
        source_error: str | None = None,
    ) -> Fact:
        h = self._s.scoped(scope)
        body = query_params(
            content=content, category=category, confidence=confidence, source_error=source_error
        )
        return self._s.call("POST", "/v1/facts", decode.fact, headers=h, json=body)

    def get(self, scope: Scope, fact_id: str) -> Fact:
        h = self._s.scoped(scope)
        return self._s.get(f"/v1/facts/{segment(fact_id)}", decode.fact, h)

    def edit(self, scope: Scope, fact_id: str, **changes: Any) -> Fact:
        if not changes:
            raise InvalidInput("nothing to change", field="content")
        h = self._s.scoped(scope)
        path = f"/v1/facts/{segment(fact_id)}"
        return self._s.call("PATCH", path, decode.fact, headers=h, json=changes)

    def delete(self, scope: Scope, fact_id: str) -> Receipt:
        h = self._s.scoped(scope)
        r = self._s.send("DELETE", f"/v1/facts/{segment(fact_id)}", headers=h)
        return receipt_of(self._s, r, h)

    def history(self, scope: Scope, fact_id: str) -> builtins.list[FactEvent]:
        h = self._s.scoped(scope)
        path = f"/v1/facts/{segment(fact_id)}/history"
        return self._s.get(path, decode.items(decode.fact_event), h)


class RemoteLongTerm:
    """``mem.longterm`` over HTTP (the profile; extraction runs on the server)."""

    def __init__(self, session: Session) -> None:
        self._s = session

    def profile(
        self,
        scope: Scope,
        *,
        as_of: datetime | str | None = None,
        known_at: datetime | str | None = None,
    ) -> list[ProfileSection]:
        h = self._s.scoped(scope)
        params = query_params(
            as_of=iso_time(as_of, "as_of"), known_at=iso_time(known_at, "known_at")
        )
        return self._s.get("/v1/profile", decode.profile, h, params)

    def observe(
        self, scope: Scope, conversation_id: str, *, leaf_id: str | None = None
    ) -> Job:
        """Queue (or push back) the conversation's extraction on the server; the job."""
        h = self._s.scoped(scope)
        job_of = decode.job(scope.tenant)
        # Queueing merges by key on the server, so sending it again is harmless.
        return self._s.call(
            "POST",
            f"{conversation_path(conversation_id)}/observe",
            lambda d: job_of(d["job"]),
            headers=h,
            json=query_params(leaf_id=leaf_id),
            idempotent=True,
        )


class RemoteJobs:
    """``mem.jobs`` over HTTP: a user key sees its jobs, an admin key its tenant's."""

    def __init__(self, session: Session) -> None:
        self._s = session

    def _owner(self, tenant: str | None, user: str | None) -> tuple[str, dict[str, str]]:
        me = self._s.identity()
        return me.tenant, owner_headers(me, tenant, user)

    def list(
        self,
        *,
        tenant: str | None = None,
        user: str | None = None,
        status: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[Job]:
        """Newest first: the key's tenant (or ``user``); another tenant is Forbidden."""
        t, h = self._owner(tenant, user)
        params = query_params(status=status, limit=limit, cursor=cursor)
        return self._s.get("/v1/jobs", decode.page(decode.job(t)), h, params)

    def get(self, job_id: str, *, tenant: str | None = None, user: str | None = None) -> Job:
        t, h = self._owner(tenant, user)
        return self._s.get(f"/v1/jobs/{segment(job_id)}", decode.job(t), h)

    def retry(self, job_id: str, *, tenant: str | None = None) -> Job:
        """Send a dead job back to the queue."""
        t, h = self._owner(tenant, None)
        path = f"/v1/jobs/{segment(job_id)}/retry"
        return self._s.call("POST", path, decode.job(t), headers=h)


class RemoteUsers:
    """``mem.users`` over HTTP (admin keys)."""

    def __init__(self, session: Session) -> None:
        self._s = session

    def list(
        self, tenant: str, *, limit: int | None = None, cursor: str | None = None
    ) -> Page[tuple[str, datetime]]:
        check_tenant(self._s.identity(), tenant)
        params = query_params(limit=limit, cursor=cursor)
        return self._s.get("/v1/users", decode.page(decode.user), {}, params)

    def delete(self, scope: Scope) -> UserDeleted:
        """Delete ``scope.user`` and everything it owns: the conversations removed, carrying
        the deletion's receipt (as embedded)."""
        check_tenant(self._s.identity(), scope.tenant)
        r = self._s.send("DELETE", f"/v1/users/{segment(scope.user)}", headers={})
        receipt = receipt_of(self._s, r, {})
        return UserDeleted(len(receipt.subject_ids) - 1, receipt)
