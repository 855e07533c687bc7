"""Generated from ``_async_retention.py`` by ``scripts/unasync.py``: do not edit."""

from __future__ import annotations

from collections.abc import Callable, Mapping
from typing import Any

from memstrata.api._sync_base import SubAPI
from memstrata.api._sync_nodes import Nodes
from memstrata.errors import InvalidInput
from memstrata.retention import (
    ALL_TENANTS,
    KINDS,
    Policy,
    candidates,
    check_kind,
    count,
    delete_policy,
    list_policies,
    purge,
    set_policy,
)
from memstrata.types import Scope

__all__ = ["RETENTION_JOB", "Retention"]

RETENTION_JOB = "memstrata.retention"
_S = 1_000_000


class Retention(SubAPI):
    """Per-tenant retention policies, applied by ``apply`` (``memstrata gc --policies``) and
    by a periodic job while any policy exists."""

    def set(self, tenant: str, kind: str, max_age_s: float) -> Policy:
        """Keep ``kind`` of ``tenant`` (``"*"``: every tenant without its own) for ``max_age_s``."""
        if tenant != ALL_TENANTS:
            Scope(tenant, "x")  # validates the name
        rt = self._core.rt
        policy = self._write(set_policy, rt, tenant, kind, max_age_s)
        self.schedule()
        return policy

    def delete(self, tenant: str, kind: str) -> bool:
        return self._write(delete_policy, tenant, kind)

    def policies(self) -> list[Policy]:
        return self._read(list_policies)

    def schedule(self, delay_s: float = 0.0) -> None:
        """Queue the periodic retention job (one at a time, whoever asks)."""
        self._enqueue(
            RETENTION_JOB,
            tenant=ALL_TENANTS,
            user=None,
            agent=None,
            key=RETENTION_JOB,
            delay_s=delay_s,
            max_wait_s=delay_s,
            max_attempts=3,
        )

    def apply(
        self,
        *,
        overrides: Mapping[str, float] | None = None,
        tenant: str | None = None,
        dry_run: bool = False,
        progress: Callable[[str, int], None] | None = None,
    ) -> dict[str, int]:
        """Delete what is past retention; returns counts per kind (a dry run only counts).

        ``overrides`` ({kind: max_age_s}) applies one age to every tenant (or to ``tenant``)
        instead of the stored policies.
        """
        plan = self._plan(overrides, tenant)
        counts = dict.fromkeys(KINDS, 0)
        for kind, who, max_age_s, exclude in plan:
            counts[kind] += self._apply_one(kind, who, max_age_s, exclude, dry_run, progress)
        return counts

    def _plan(
        self, overrides: Mapping[str, float] | None, tenant: str | None
    ) -> list[tuple[str, str | None, float, list[str]]]:
        """(kind, tenant or None for "the rest", max age, tenants the rest excludes)."""
        if overrides is not None:
            for kind, age in overrides.items():
                check_kind(kind)
                if not age >= 0:
                    raise InvalidInput("a retention age cannot be negative", field=kind)
            return [(k, tenant, age, []) for k, age in overrides.items()]
        plan: list[tuple[str, str | None, float, list[str]]] = []
        policies = self.policies()
        for kind in KINDS:
            own = [p for p in policies if p.kind == kind and p.tenant != ALL_TENANTS]
            default = next(
                (p for p in policies if p.kind == kind and p.tenant == ALL_TENANTS), None
            )
            for p in own:
                if tenant is None or p.tenant == tenant:
                    plan.append((kind, p.tenant, p.max_age_s, []))
            if default is not None and (tenant is None or tenant not in {p.tenant for p in own}):
                # One named tenant is filtered already; "the rest" leaves out the named ones.
                rest = [p.tenant for p in own] if tenant is None else []
                plan.append((kind, tenant, default.max_age_s, rest))
        return plan

    def _apply_one(
        self,
        kind: str,
        tenant: str | None,
        max_age_s: float,
        exclude: list[str],
        dry_run: bool,
        progress: Callable[[str, int], None] | None,
    ) -> int:
        if kind == "node_memories":
            if exclude:  # "every tenant but these": the node-memory gc takes one tenant or all
                return self._nodes_except(max_age_s, exclude, dry_run)
            report = Nodes(self._core).gc(max_age_s, dry_run=dry_run, tenant=tenant)
            return report.node_memories
        rt = self._core.rt
        cutoff = rt.clock() - int(max_age_s * _S)
        if dry_run:
            return self._read(count, kind, cutoff, tenant, exclude)
        done = 0
        while True:
            keys = self._read(candidates, kind, cutoff, tenant, exclude)
            if not keys:
                return done
            done += self._write(purge, rt, kind, keys)
            if progress is not None:
                progress(kind, done)

    def _nodes_except(self, max_age_s: float, exclude: list[str], dry_run: bool) -> int:
        rows = self._read(_node_tenants)
        total = 0
        for t in rows:
            if t not in exclude:
                report = Nodes(self._core).gc(max_age_s, dry_run=dry_run, tenant=t)
                total += report.node_memories
        return total


def _node_tenants() -> Any:
    from memstrata.storage.plan import Query

    rows = yield Query("SELECT DISTINCT tenant_id FROM node_memories ORDER BY tenant_id")
    return [r[0] for r in rows]


def retention_job(job: Any, memory: Any) -> None:
    """Job handler: apply the stored policies, then come back after the interval."""
    memory.retention.apply()
    interval = memory.core.settings.retention_interval_seconds
    if interval > 0 and memory.retention.policies():
        memory.retention.schedule(delay_s=interval)
