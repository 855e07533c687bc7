"""Generated from ``_async_retention.py`` by ``scripts/unasync.py``: do not edit."""

from __future__ import annotations

from collections.abc import Callable, Mapping

from memstrata.api._sync_base import SubAPI
from memstrata.api._sync_nodes import Nodes
from memstrata.retention import (
    ALL_TENANTS,
    KINDS,
    RETENTION_JOB,
    Policy,
    Step,
    candidates,
    count,
    cutoff,
    delete_policy,
    list_policies,
    node_tenants,
    plan,
    purge,
    set_policy,
)
from memstrata.types import Scope

# RETENTION_JOB is named here too for callers that imported it from the facade.
__all__ = ["RETENTION_JOB", "Retention"]


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
        stored = [] if overrides is not None else self.policies()
        steps = plan(stored, overrides=overrides, tenant=tenant)
        counts = dict.fromkeys(KINDS, 0)
        for step in steps:
            counts[step.kind] += self._apply_one(step, dry_run, progress)
        return counts

    def _apply_one(
        self, step: Step, dry_run: bool, progress: Callable[[str, int], None] | None
    ) -> int:
        kind, tenant, exclude = step.kind, step.tenant, list(step.exclude)
        if kind == "node_memories":
            return self._nodes(step, dry_run)
        rt = self._core.rt
        before = cutoff(rt.clock(), step.max_age_s)
        if dry_run:
            return self._read(count, kind, before, tenant, exclude)
        done = 0
        while True:
            keys = self._read(candidates, kind, before, tenant, exclude)
            if not keys:
                return done
            done += self._write(purge, rt, kind, keys)
            if progress is not None:
                progress(kind, done)

    def _nodes(self, step: Step, dry_run: bool) -> int:
        """Node memories go through their own gc (blobs too), which takes one tenant or all:
        "every tenant but these" runs it per remaining tenant."""
        nodes = Nodes(self._core)
        if not step.exclude:
            report = nodes.gc(step.max_age_s, dry_run=dry_run, tenant=step.tenant)
            return report.node_memories
        total = 0
        for t in self._read(node_tenants):
            if t not in step.exclude:
                report = nodes.gc(step.max_age_s, dry_run=dry_run, tenant=t)
                total += report.node_memories
        return total
