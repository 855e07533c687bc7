"""Generated from ``_async_usage.py`` by ``scripts/unasync.py``: do not edit."""

from __future__ import annotations

from collections.abc import Callable
from datetime import date, datetime
from typing import Any

from memstrata.client._sync_session import Session, query_params
from memstrata.client._wire import check_tenant, owner_headers, segment
from memstrata.domain.usage import Budget, UsageReport, report_from_dict
from memstrata.errors import NotFound
from memstrata.types import Scope

__all__ = ["RemoteUsage"]


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


class RemoteUsage:
    """``mem.usage`` over HTTP."""

    def __init__(self, session: Session) -> None:
        self._s = session

    def report(
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
        me = self._s.identity()
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
        return self._s.get("/v1/usage", report_from_dict, headers, params)

    def budgets(self, tenant: str | None = None) -> list[Budget]:
        me = self._s.identity()
        if tenant is not None:
            check_tenant(me, tenant)
        page = self._s.get("/v1/budgets", lambda d: d, {})
        return [_budget(me.tenant)(b) for b in page["items"]]

    def set_budget(self, tenant: str, purpose: str, tokens: int) -> Budget:
        check_tenant(self._s.identity(), tenant)
        return self._s.call(
            "PUT",
            "/v1/budgets",
            _budget(tenant),
            headers={},
            json={"purpose": purpose, "daily_tokens": tokens},
            idempotent=True,
        )

    def clear_budget(self, tenant: str, purpose: str) -> bool:
        check_tenant(self._s.identity(), tenant)
        try:
            self._s.send("DELETE", f"/v1/budgets/{segment(purpose)}", headers={})
        except NotFound:
            return False
        return True
