"""Generated from ``_async_memory.py`` by ``scripts/unasync.py``: do not edit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memstrata.client import _decode as decode
from memstrata.client._sync_session import Session
from memstrata.client._wire import segment
from memstrata.domain.jobs import Job
from memstrata.domain.memory import Consolidation, ConsolidationRevert, MemoryHealth
from memstrata.types import Scope
from memstrata.wire.memory import ConsolidationOut, ConsolidationRevertOut, MemoryHealthOut

__all__ = ["RemoteMemoryMaintenance"]

_health: Callable[[Any], MemoryHealth] = MemoryHealthOut.decoder()
_consolidation: Callable[[Any], Consolidation] = ConsolidationOut.decoder()
_revert: Callable[[Any], ConsolidationRevert] = ConsolidationRevertOut.decoder()


class RemoteMemoryMaintenance:
    """``mem.memory`` over HTTP, with the embedded methods' names and results."""

    def __init__(self, session: Session) -> None:
        self._s = session

    def health(
        self, scope: Scope, *, stale_days: int = 90, examples: int = 5
    ) -> MemoryHealth:
        h = self._s.scoped(scope)
        params = {"stale_days": stale_days, "examples": examples}
        return self._s.get("/v1/memory/health", _health, h, params)

    def consolidate(
        self, scope: Scope, *, dry_run: bool = True, semantic: bool = False
    ) -> Consolidation:
        """Plan (and with ``dry_run=False`` apply, in this call) a consolidation."""
        h = self._s.scoped(scope)
        body = {"dry_run": dry_run, "background": False, "semantic": semantic}
        return self._s.call(
            "POST",
            "/v1/memory/consolidate",
            _consolidation,
            headers=h,
            json=body,
            idempotent=dry_run,
        )

    def schedule_consolidation(self, scope: Scope, *, semantic: bool = False) -> Job:
        """Apply a consolidation as a server job; the job's id is the consolidation's."""
        h = self._s.scoped(scope)
        job_of = decode.job(scope.tenant)
        body = {"dry_run": False, "background": True, "semantic": semantic}
        return self._s.call(
            "POST", "/v1/memory/consolidate", lambda d: job_of(d["job"]), headers=h, json=body
        )

    def revert(self, scope: Scope, consolidation_id: str) -> ConsolidationRevert:
        h = self._s.scoped(scope)
        path = f"/v1/memory/consolidations/{segment(consolidation_id)}/revert"
        return self._s.call("POST", path, _revert, headers=h)
