"""The stored retention policies and the sans-IO operations that count and delete what is
past them (see :mod:`memstrata.retention` for the kinds)."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memstrata.errors import InvalidInput
from memstrata.runtime import Runtime
from memstrata.storage.plan import Exec, Op, Query
from memstrata.storage.records import from_micros

__all__ = [
    "ALL_TENANTS",
    "DEFAULT_MAX_AGE_S",
    "KINDS",
    "Policy",
    "candidates",
    "count",
    "cutoff",
    "delete_policy",
    "list_policies",
    "node_tenants",
    "purge",
    "set_policy",
]

KINDS = (
    "conversations",
    "node_memories",
    "jobs",
    "checkpoints",
    "snapshots",
    "context_records",
    "usage",
    "receipts",
)
#: Kinds kept for a bounded time even without a policy: deletion receipts hold ids and
#: counts only, and are kept a year unless a policy says otherwise.
DEFAULT_MAX_AGE_S: dict[str, float] = {"receipts": 365 * 86400.0}
ALL_TENANTS = "*"
_S = 1_000_000

# kind -> (table, the id column(s), the age column, the tenant filter)
_SQL: dict[str, tuple[str, str, str, str]] = {
    "conversations": ("conversations", "id", "updated_at", "tenant_id"),
    "jobs": ("jobs", "id", "finished_at", "tenant_id"),
    "checkpoints": (
        "checkpoints",
        "tenant_id, user_id, agent_id, name, run_id",
        "coalesce(expired_at, expires_at)",
        "tenant_id",
    ),
    # Snapshots carry no tenant: it is their conversation's (see _tenant_sql).
    "snapshots": ("run_snapshots", "conversation_id, run_id", "updated_at", ""),
    # Prompt provenance: records by the time they were made (their items go with them).
    "context_records": ("context_records", "id", "created_at", "tenant_id"),
    # Usage rows (model calls), by the time of the call; budgets use the daily totals.
    "usage": ("usage_events", "id", "at", "tenant_id"),
    "receipts": ("deletion_receipts", "id", "created_at", "tenant_id"),
}


@dataclass(frozen=True, slots=True)
class Policy:
    tenant: str
    kind: str
    max_age_s: float
    updated_at: Any

    def to_dict(self) -> dict[str, Any]:
        return {
            "tenant": self.tenant,
            "kind": self.kind,
            "max_age_s": self.max_age_s,
            "updated_at": self.updated_at.isoformat(),
        }


def check_kind(kind: str) -> str:
    if kind not in KINDS:
        raise InvalidInput(f"kind must be one of {', '.join(KINDS)}", field="kind")
    return kind


def set_policy(rt: Runtime, tenant: str, kind: str, max_age_s: float) -> Op[Policy]:
    check_kind(kind)
    if not max_age_s >= 1:
        raise InvalidInput("max_age must be at least one second", field="max_age")
    now = rt.clock()
    yield Exec(
        "INSERT INTO retention_policies (tenant_id, kind, max_age_s, updated_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT (tenant_id, kind) DO UPDATE SET max_age_s = excluded.max_age_s, "
        "updated_at = excluded.updated_at",
        (tenant, kind, int(max_age_s), now),
    )
    return Policy(tenant, kind, float(int(max_age_s)), from_micros(now))


def delete_policy(tenant: str, kind: str) -> Op[bool]:
    n = yield Exec(
        "DELETE FROM retention_policies WHERE tenant_id = ? AND kind = ?",
        (tenant, check_kind(kind)),
    )
    return bool(n)


def cutoff(now: int, max_age_s: float) -> int:
    """The timestamp (microseconds) before which data of that age is past retention."""
    return now - int(max_age_s * _S)


def node_tenants() -> Op[list[str]]:
    """Tenants holding node memories (their gc takes one tenant or all)."""
    rows = yield Query("SELECT DISTINCT tenant_id FROM node_memories ORDER BY tenant_id")
    return [r[0] for r in rows]


def list_policies() -> Op[list[Policy]]:
    rows = yield Query(
        "SELECT tenant_id, kind, max_age_s, updated_at FROM retention_policies ORDER BY tenant_id, kind"
    )
    return [Policy(r[0], r[1], float(r[2]), from_micros(r[3])) for r in rows]


def _tenant_sql(kind: str, tenant: str | None, exclude: Sequence[str]) -> tuple[str, list[Any]]:
    """The tenant condition of ``kind``: one tenant, or every tenant but ``exclude``."""
    column = _SQL[kind][3]
    if kind == "snapshots":
        inner = "SELECT id FROM conversations WHERE "
        if tenant is not None:
            return f"conversation_id IN ({inner}tenant_id = ?)", [tenant]
        if not exclude:
            return "1 = 1", []
        marks = ", ".join("?" * len(exclude))
        return f"conversation_id NOT IN ({inner}tenant_id IN ({marks}))", list(exclude)
    if tenant is not None:
        return f"{column} = ?", [tenant]
    if not exclude:
        return "1 = 1", []
    return f"{column} NOT IN ({', '.join('?' * len(exclude))})", list(exclude)


def candidates(
    kind: str, cutoff: int, tenant: str | None, exclude: Sequence[str] = (), limit: int = 500
) -> Op[list[tuple[Any, ...]]]:
    """Keys of up to ``limit`` rows of ``kind`` older than ``cutoff`` (µs), oldest first.
    ``tenant`` None means every tenant except those in ``exclude`` (which have their own
    policy)."""
    table, key, age, _ = _SQL[kind]
    where, params = _tenant_sql(kind, tenant, exclude)
    extra = " AND status = 'done'" if kind == "jobs" else ""
    rows = yield Query(
        f"SELECT {key} FROM {table} WHERE {where}{extra} AND {age} IS NOT NULL AND {age} < ? "
        f"ORDER BY {age}, {key} LIMIT ?",
        (*params, cutoff, limit),
    )
    return [tuple(r) for r in rows]


def count(kind: str, cutoff: int, tenant: str | None, exclude: Sequence[str] = ()) -> Op[int]:
    """How many rows ``candidates`` would find, all pages together (for dry runs)."""
    table, _, age, _ = _SQL[kind]
    where, params = _tenant_sql(kind, tenant, exclude)
    extra = " AND status = 'done'" if kind == "jobs" else ""
    rows = yield Query(
        f"SELECT count(*) FROM {table} WHERE {where}{extra} AND {age} IS NOT NULL AND {age} < ?",
        (*params, cutoff),
    )
    return int(rows[0][0])


def purge(rt: Runtime, kind: str, keys: Sequence[tuple[Any, ...]]) -> Op[int]:
    """Delete the rows ``candidates`` returned (conversations through the cascade)."""
    if not keys:
        return 0
    if kind == "conversations":
        yield from rt.cascade.delete_conversations([k[0] for k in keys])
        return len(keys)
    if kind == "context_records":
        ids = [k[0] for k in keys]
        marks = ", ".join("?" * len(ids))
        yield Exec(f"DELETE FROM context_record_items WHERE context_id IN ({marks})", ids)
        return int((yield Exec(f"DELETE FROM context_records WHERE id IN ({marks})", ids)))
    table, key, _, _ = _SQL[kind]
    cols = [c.strip() for c in key.split(",")]
    match = " AND ".join(f"{c} = ?" for c in cols)
    n = 0
    for k in keys:
        n += yield Exec(f"DELETE FROM {table} WHERE {match}", k)
    return n
