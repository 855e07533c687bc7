"""``mem.usage`` over HTTP: reports (a user key: itself; an admin key: its tenant or one
user) and the tenant's budgets (admin keys). ``_sync_usage.py`` is generated from this
file by ``scripts/unasync.py``."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime
from typing import Any

from memstrata.client._async_session import AsyncSession, query_params
from memstrata.client._wire import check_tenant, owner_headers, segment
from memstrata.domain.usage import Budget, UsageReport, report_from_dict
from memstrata.errors import NotFound
from memstrata.types import Scope

__all__ = ["AsyncRemoteUsage"]


def _when(value: datetime | date | str | None) -> str | None:
    return value.isoformat() if isinstance(value, date) else value


def _budget(tenant: str) -> Callable[[Any], Budget]:
    def decode(d: dict[str, Any]) -> Budget:
        return Budget(
            tenant,
            d["purpose"],
            d["daily_tokens"],
            d["used_today"],
            datetime.fromisoformat(d["updated_at"]),
        )

    return decode


class AsyncRemoteUsage:
    """``mem.usage`` over HTTP."""

    def __init__(self, session: AsyncSession) -> None:
        self._s = session

    async def report(
        self,
        owner: Scope | str | None,
        *,
        user: str | None = None,
        start: datetime | date | str | None = None,
        end: datetime | date | str | None = None,
        group_by: str = "purpose",
        limit: int | None = None,
        cursor: str | None = None,
    ) -> UsageReport:
        """Usage of the key's tenant (admin keys; ``user=`` or a :class:`Scope` for one
        user), or of the key's own user (user keys)."""
        me = await self._s.identity()
        if isinstance(owner, Scope):
            tenant, user = owner.tenant, owner.user
        else:
            tenant = owner if owner is not None else me.tenant
        # A user key reports on itself (another user is Forbidden here, as on the server).
        headers = owner_headers(me, tenant, user)
        params = query_params(
            group_by=group_by,
            limit=limit,
            cursor=cursor,
            **{"from": _when(start), "to": _when(end)},
        )
        return await self._s.get("/v1/usage", report_from_dict, headers, params)

    async def budgets(self, tenant: str | None = None) -> list[Budget]:
        me = await self._s.identity()
        if tenant is not None:
            check_tenant(me, tenant)
        page = await self._s.get("/v1/budgets", lambda d: d, {})
        return [_budget(me.tenant)(b) for b in page["items"]]

    async def set_budget(self, tenant: str, purpose: str, tokens: int) -> Budget:
        check_tenant(await self._s.identity(), tenant)
        return await self._s.call(
            "PUT",
            "/v1/budgets",
            _budget(tenant),
            headers={},
            json={"purpose": purpose, "daily_tokens": tokens},
            idempotent=True,
        )

    async def clear_budget(self, tenant: str, purpose: str) -> bool:
        check_tenant(await self._s.identity(), tenant)
        try:
            await self._s.send("DELETE", f"/v1/budgets/{segment(purpose)}", headers={})
        except NotFound:
            return False
        return True
