"""Usage and budgets as the facade, the REST server and the remote client share them."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import UTC, date, datetime
from typing import Any

from memstrata.errors import InvalidInput

__all__ = ["Budget", "UsageReport", "UsageTotal", "parse_time", "report_from_dict"]


@dataclass(frozen=True, slots=True)
class UsageReport:
    """Usage of a tenant (or one user) in ``[start, end)``, per purpose or per user."""

    start: datetime
    end: datetime
    group_by: str
    items: list[UsageTotal]
    next_cursor: str | None
    total: UsageTotal

    def to_dict(self) -> dict[str, Any]:
        def one(t: UsageTotal) -> dict[str, Any]:
            return {
                "key": t.key,
                "calls": t.calls,
                "errors": t.errors,
                "input_tokens": t.input_tokens,
                "output_tokens": t.output_tokens,
                "tokens": t.tokens,
                "duration_s": t.duration_s,
            }

        return {
            "from": self.start.isoformat(),
            "to": self.end.isoformat(),
            "group_by": self.group_by,
            "items": [one(t) for t in self.items],
            "next_cursor": self.next_cursor,
            "total": one(self.total),
        }


def parse_time(value: datetime | date | str | None, name: str) -> datetime | None:
    """An ISO 8601 time (or date: its midnight), UTC when it names no offset."""
    if value is None or isinstance(value, datetime):
        out = value
    elif isinstance(value, date):
        out = datetime(value.year, value.month, value.day, tzinfo=UTC)
    else:
        try:
            out = datetime.fromisoformat(
                value.strip().replace("Z", "+00:00").replace("z", "+00:00")
            )
        except ValueError:
            raise InvalidInput(
                f"{name} must be an ISO 8601 time, e.g. 2026-11-25T00:00:00Z", field=name
            ) from None
    if out is None:
        return None
    out = out if out.tzinfo is not None else out.replace(tzinfo=UTC)
    if not datetime(1970, 1, 1, tzinfo=UTC) <= out <= datetime(9999, 1, 1, tzinfo=UTC):
        raise InvalidInput(f"{name} is out of range", field=name)
    return out


def _total(d: dict[str, Any]) -> UsageTotal:
    return UsageTotal(
        d["key"], d["calls"], d["errors"], d["input_tokens"], d["output_tokens"], d["duration_s"]
    )


def report_from_dict(d: dict[str, Any]) -> UsageReport:
    """The report a server sent (``GET /v1/usage``)."""
    return UsageReport(
        datetime.fromisoformat(d["from"]),
        datetime.fromisoformat(d["to"]),
        d["group_by"],
        [_total(i) for i in d["items"]],
        d["next_cursor"],
        _total(d["total"]),
    )


@dataclass(frozen=True, slots=True)
class UsageTotal:
    """Usage of one group (a purpose or a user) over a period."""

    key: str
    calls: int
    errors: int
    input_tokens: int
    output_tokens: int
    duration_s: float

    @property
    def tokens(self) -> int:
        return self.input_tokens + self.output_tokens


@dataclass(frozen=True, slots=True)
class Budget:
    """A tenant's daily token budget for one purpose, and what today (UTC) used of it."""

    tenant: str
    purpose: str
    daily_tokens: int
    used_today: int
    updated_at: datetime

    @property
    def exhausted(self) -> bool:
        return self.used_today >= self.daily_tokens
