"""Usage rows, daily totals and budgets: the sans-IO operations on the usage tables.

Purposes are free strings; the ones memstrata itself makes are listed in
:data:`PURPOSES`. Budgets are per tenant, per purpose, in tokens (input + output) per
UTC day; a budget of 0 blocks the purpose.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from memstrata.domain.usage import Budget, UsageTotal
from memstrata.errors import InvalidInput
from memstrata.storage.plan import Exec, Op, Query
from memstrata.storage.records import from_micros

__all__ = [
    "ANONYMOUS_USER",
    "JOB_PURPOSES",
    "PURPOSES",
    "Budget",
    "GroupBy",
    "UsageRow",
    "UsageTotal",
    "anonymise_user",
    "budget_clause",
    "check_purpose",
    "clear_budget",
    "day_of",
    "exhausted",
    "held_back",
    "insert_rows",
    "list_budgets",
    "report",
    "set_budget",
    "total",
]

DAY_US = 86_400_000_000

#: Purposes of the calls memstrata makes itself (and those a budget usually names):
#: ``extraction`` (long-term facts), ``compaction`` (summaries), ``consolidation``
#: (memory health), ``embedding`` (indexing messages for recall), ``query`` (embedding
#: a search or context query at read time), ``chat`` (an LLM call that names none).
PURPOSES = ("extraction", "compaction", "consolidation", "embedding", "query", "chat")

#: The purpose of each job kind: a budget of that purpose holds its jobs back.
JOB_PURPOSES: Mapping[str, str] = {
    "longterm.extract": "extraction",
    "memstrata.compact": "compaction",
    "longterm.consolidate": "consolidation",
    "recall.embed": "embedding",
}

#: Who a deleted user's usage rows belong to afterwards: the tenant's accounting keeps
#: its totals, the user's id is gone.
ANONYMOUS_USER = "-deleted-"

GroupBy = Literal["purpose", "user"]


def day_of(micros: int) -> int:
    """The UTC day (days since the epoch) of a time in microseconds."""
    return micros // DAY_US


def check_purpose(purpose: str) -> str:
    if not purpose or len(purpose) > 64 or not purpose.replace("_", "").replace(".", "").isalnum():
        raise InvalidInput(
            "purpose must be 1-64 letters, digits, '_' or '.' (e.g. extraction)", field="purpose"
        )
    return purpose


@dataclass(frozen=True, slots=True)
class UsageRow:
    """One LLM call, or several embedder calls of one owner, purpose and model."""

    tenant: str
    user: str
    agent: str
    purpose: str
    model: str
    kind: str  # "llm" or "embed"
    calls: int
    errors: int
    input_tokens: int
    output_tokens: int
    duration_us: int
    at: int
    job_id: str | None = None


def insert_rows(rows: Sequence[UsageRow], ids: Sequence[str]) -> Op[None]:
    """Store ``rows`` and add their tokens to the daily totals, in one transaction."""
    daily: dict[tuple[str, str, int], int] = {}
    for row, rid in zip(rows, ids, strict=True):
        yield Exec(
            "INSERT INTO usage_events (id, tenant_id, user_id, agent_id, purpose, model, kind, "
            "calls, errors, input_tokens, output_tokens, duration_us, job_id, at) "
            "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
            (
                rid,
                row.tenant,
                row.user,
                row.agent,
                row.purpose,
                row.model,
                row.kind,
                row.calls,
                row.errors,
                row.input_tokens,
                row.output_tokens,
                row.duration_us,
                row.job_id,
                row.at,
            ),
        )
        key = (row.tenant, row.purpose, day_of(row.at))
        daily[key] = daily.get(key, 0) + row.input_tokens + row.output_tokens
    for (tenant, purpose, day), tokens in sorted(daily.items()):
        yield Exec(
            "INSERT INTO usage_daily (tenant_id, purpose, day, tokens) VALUES (?, ?, ?, ?) "
            "ON CONFLICT (tenant_id, purpose, day) DO UPDATE SET "
            "tokens = usage_daily.tokens + excluded.tokens",
            (tenant, purpose, day, tokens),
        )


def report(
    *,
    tenant: str | None,
    user: str | None,
    start: int,
    end: int,
    group_by: GroupBy,
    after: str | None,
    limit: int,
) -> Op[list[UsageTotal]]:
    """Totals per ``group_by`` key of ``tenant`` (or of one ``user``) for calls made in
    ``[start, end)`` (µs), ordered by key, after the key ``after`` (the page cursor).
    ``tenant`` None: every tenant (operators)."""
    column = {"purpose": "purpose", "user": "user_id"}[group_by]
    where = ["at >= ?", "at < ?"]
    params: list[Any] = [start, end]
    if tenant is not None:
        where.append("tenant_id = ?")
        params.append(tenant)
    if user is not None:
        where.append("user_id = ?")
        params.append(user)
    if after is not None:
        where.append(f"{column} > ?")
        params.append(after)
    rows = yield Query(
        f"SELECT {column}, sum(calls), sum(errors), sum(input_tokens), sum(output_tokens), "
        f"sum(duration_us) FROM usage_events WHERE {' AND '.join(where)} "
        f"GROUP BY {column} ORDER BY {column} LIMIT ?",
        (*params, limit),
    )
    return [
        UsageTotal(r[0], int(r[1]), int(r[2]), int(r[3]), int(r[4]), int(r[5]) / 1_000_000)
        for r in rows
    ]


def set_budget(tenant: str, purpose: str, tokens: int, now: int) -> Op[Budget]:
    check_purpose(purpose)
    if isinstance(tokens, bool) or not isinstance(tokens, int) or not 0 <= tokens < 2**62:
        raise InvalidInput("tokens must be a whole number >= 0", field="tokens")
    yield Exec(
        "INSERT INTO usage_budgets (tenant_id, purpose, daily_tokens, updated_at) "
        "VALUES (?, ?, ?, ?) ON CONFLICT (tenant_id, purpose) DO UPDATE SET "
        "daily_tokens = excluded.daily_tokens, updated_at = excluded.updated_at",
        (tenant, purpose, tokens, now),
    )
    budgets = yield from list_budgets(tenant, now)
    return next(b for b in budgets if b.purpose == purpose)


def clear_budget(tenant: str, purpose: str) -> Op[bool]:
    n = yield Exec(
        "DELETE FROM usage_budgets WHERE tenant_id = ? AND purpose = ?",
        (tenant, check_purpose(purpose)),
    )
    return bool(n)


def list_budgets(tenant: str | None, now: int) -> Op[list[Budget]]:
    """Budgets (of one tenant, or all), each with today's (UTC) use."""
    where, params = ("WHERE b.tenant_id = ? ", [tenant]) if tenant is not None else ("", [])
    rows = yield Query(
        "SELECT b.tenant_id, b.purpose, b.daily_tokens, b.updated_at, coalesce(d.tokens, 0) "
        "FROM usage_budgets b LEFT JOIN usage_daily d ON d.tenant_id = b.tenant_id "
        f"AND d.purpose = b.purpose AND d.day = ? {where}ORDER BY b.tenant_id, b.purpose",
        (day_of(now), *params),
    )
    return [Budget(r[0], r[1], int(r[2]), int(r[4]), from_micros(r[3])) for r in rows]


def exhausted(tenants: Sequence[str] | None, now: int) -> Op[set[tuple[str, str]]]:
    """The ``(tenant, purpose)`` pairs whose budget for today (UTC) is used up."""
    budgets = yield from list_budgets(None, now) if tenants is None else _of(tenants, now)
    return {(b.tenant, b.purpose) for b in budgets if b.exhausted}


def _of(tenants: Sequence[str], now: int) -> Op[list[Budget]]:
    out: list[Budget] = []
    for tenant in sorted(set(tenants)):
        out.extend((yield from list_budgets(tenant, now)))
    return out


def anonymise_user(tenant: str, user: str) -> Op[None]:
    """Cascade step: a deleted user's usage rows stay in the tenant's accounting under
    :data:`ANONYMOUS_USER` (tokens spent stay spent; the user's id goes)."""
    yield Exec(
        "UPDATE usage_events SET user_id = ?, agent_id = '' WHERE tenant_id = ? AND user_id = ?",
        (ANONYMOUS_USER, tenant, user),
    )


def budget_clause(
    purposes: Mapping[str, str], now: int, *, kind: str = "j.kind", tenant: str = "j.tenant_id"
) -> tuple[str, list[Any]]:
    """A SQL condition true for jobs whose purpose's budget (of their tenant) is used up
    today, for a claim to leave them queued; ``purposes`` maps job kinds to purposes."""
    if not purposes:
        return "1 = 0", []
    cases = " ".join("WHEN ? THEN ?" for _ in purposes)
    params: list[Any] = [v for pair in sorted(purposes.items()) for v in pair]
    return (
        "EXISTS (SELECT 1 FROM usage_budgets b WHERE b.tenant_id = "
        f"{tenant} AND b.purpose = (CASE {kind} {cases} END) AND b.daily_tokens <= "
        "coalesce((SELECT d.tokens FROM usage_daily d WHERE d.tenant_id = b.tenant_id "
        "AND d.purpose = b.purpose AND d.day = ?), 0))",
        [*params, day_of(now)],
    )


def total(*, tenant: str | None, user: str | None, start: int, end: int) -> Op[UsageTotal]:
    """All usage of ``tenant`` (or one ``user``; None: every tenant) in ``[start, end)``."""
    where = "at >= ? AND at < ?"
    params: list[Any] = [start, end]
    if tenant is not None:
        where += " AND tenant_id = ?"
        params.append(tenant)
    if user is not None:
        where += " AND user_id = ?"
        params.append(user)
    rows = yield Query(
        "SELECT coalesce(sum(calls), 0), coalesce(sum(errors), 0), coalesce(sum(input_tokens), 0), "
        "coalesce(sum(output_tokens), 0), coalesce(sum(duration_us), 0) "
        f"FROM usage_events WHERE {where}",
        params,
    )
    r = rows[0]
    return UsageTotal("*", int(r[0]), int(r[1]), int(r[2]), int(r[3]), int(r[4]) / 1_000_000)


def held_back(purposes: Mapping[str, str], now: int) -> Op[list[tuple[Budget, int]]]:
    """Each budget used up today with the number of queued jobs it holds back."""
    budgets = yield from list_budgets(None, now)
    out: list[tuple[Budget, int]] = []
    for b in budgets:
        if not b.exhausted:
            continue
        kinds = sorted(k for k, p in purposes.items() if p == b.purpose)
        waiting = 0
        if kinds:
            rows = yield Query(
                "SELECT count(*) FROM jobs WHERE tenant_id = ? AND status = 'queued' AND kind IN "
                f"({', '.join('?' * len(kinds))})",
                (b.tenant, *kinds),
            )
            waiting = int(rows[0][0])
        out.append((b, waiting))
    return out
