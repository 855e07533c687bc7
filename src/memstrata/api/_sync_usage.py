"""Generated from ``_async_usage.py`` by ``scripts/unasync.py``: do not edit."""

from __future__ import annotations

from datetime import date, datetime, timedelta
from typing import Any

from memstrata.api._sync_base import SubAPI
from memstrata.domain.usage import UsageReport, parse_time
from memstrata.errors import InvalidInput
from memstrata.runtime import page_limit
from memstrata.storage import sql
from memstrata.storage.records import from_micros, to_micros
from memstrata.types import Scope
from memstrata.usage import store as usage_ops
from memstrata.usage.store import Budget, GroupBy

__all__ = ["Usage", "UsageReport", "parse_time"]

#: A report without ``start`` covers this much time before its end.
DEFAULT_SPAN = timedelta(days=30)


def _group(group_by: str) -> GroupBy:
    if group_by == "purpose":
        return "purpose"
    if group_by == "user":
        return "user"
    raise InvalidInput("group_by must be user or purpose", field="group_by")


class Usage(SubAPI):
    """Model calls recorded per tenant, user and purpose; per-tenant daily token budgets."""

    def flush(self) -> int:
        """Write the usage rows this process still buffers (they are written every second,
        at job ends and at close anyway); returns how many rows were written."""
        return self._core.flush_usage()

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
        """Usage of a tenant (``owner`` a tenant name), or of one user (a :class:`Scope`,
        or ``user=``), for calls made in ``[start, end)``: ``end`` defaults to now,
        ``start`` to 30 days before it. ``group_by`` is ``purpose`` or ``user``.
        ``owner`` None sums every tenant (operators; the CLI without ``--tenant``)."""
        tenant: str | None
        if isinstance(owner, Scope):
            tenant, user = owner.tenant, owner.user
        else:
            tenant = owner
            if tenant is not None:
                Scope(tenant, user or "x")  # validates the names
            elif user is not None:
                raise InvalidInput("a user needs its tenant", field="user")
        group = _group(group_by)
        t1 = parse_time(end, "to") or from_micros(self._core.rt.clock())
        t0 = parse_time(start, "from") or t1 - DEFAULT_SPAN
        if t0 > t1:
            raise InvalidInput("from must not be after to", field="from")
        n = page_limit(self._core.rt, limit)
        # The key may be "" (calls of no user): the cursor carries a prefix.
        after = None if cursor is None else (sql.decode_cursor(cursor) or "")[1:]
        self.flush()
        span: dict[str, Any] = {"tenant": tenant, "user": user}
        span.update(start=to_micros(t0), end=to_micros(t1))
        rows = self._read(usage_ops.report, **span, group_by=group, after=after, limit=n + 1)
        totals = self._read(usage_ops.total, **span)
        more = len(rows) > n
        return UsageReport(
            t0,
            t1,
            group,
            rows[:n],
            sql.encode_cursor("k" + rows[n - 1].key) if more else None,
            totals,
        )

    # -- budgets ---------------------------------------------------------------------------

    def set_budget(self, tenant: str, purpose: str, tokens: int) -> Budget:
        """Allow ``tenant`` ``tokens`` (input + output) a UTC day for ``purpose``; 0 blocks
        it. Jobs of that purpose wait (``blocked: "budget"``) once a day's budget is used."""
        Scope(tenant, "x")  # validates the name
        now = self._core.rt.clock()
        budget = self._write(usage_ops.set_budget, tenant, purpose, tokens, now)
        self._core.job_queued()  # a raised budget lets waiting jobs run now
        return budget

    def clear_budget(self, tenant: str, purpose: str) -> bool:
        """Remove a budget (no limit); False when there was none."""
        Scope(tenant, "x")
        removed = self._write(usage_ops.clear_budget, tenant, purpose)
        self._core.job_queued()
        return removed

    def budgets(self, tenant: str | None = None) -> list[Budget]:
        """Budgets (of one tenant, or every tenant), each with what today (UTC) used."""
        if tenant is not None:
            Scope(tenant, "x")
        self.flush()
        return self._read(usage_ops.list_budgets, tenant, self._core.rt.clock())

    def held_back(self) -> list[tuple[Budget, int]]:
        """Budgets used up today, each with how many queued jobs it holds back (doctor)."""
        self.flush()
        purposes = self._core.jobs.purposes()
        return self._read(usage_ops.held_back, purposes, self._core.rt.clock())
