"""An engine that runs every plan with a sealer active (encryption at rest).

The row codecs seal and open texts through :mod:`memstrata.sealing`, which reads the
active sealer from a context variable; this wrapper sets it around each plan, so the
features' operations need no extra argument. Everything else is the wrapped engine's.
"""

from __future__ import annotations

from typing import Any, TypeVar

from memstrata.sealing import Sealer, using
from memstrata.storage.engine import Engine
from memstrata.storage.plan import Plan

__all__ = ["SealedEngine"]

T = TypeVar("T")


class SealedEngine:
    """``engine`` with ``sealer`` active while each plan runs."""

    def __init__(self, engine: Engine, sealer: Sealer) -> None:
        self.inner = engine
        self.sealer = sealer
        self.dialect = engine.dialect
        self.location = engine.location

    def run(self, plan: Plan[T]) -> T:
        with using(self.sealer):
            return self.inner.run(plan)

    async def arun(self, plan: Plan[T]) -> T:
        with using(self.sealer):
            return await self.inner.arun(plan)

    def migrate(self) -> list[int]:
        return self.inner.migrate()

    def schema_version(self) -> int:
        return self.inner.schema_version()

    def close(self) -> None:
        self.inner.close()

    @property
    def closed(self) -> bool:
        return self.inner.closed

    async def aclose(self) -> None:
        await self.inner.aclose()

    def __getattr__(self, name: str) -> Any:
        # The backend's own extras (ping, pool statistics, the SQLite path) stay reachable.
        return getattr(self.inner, name)
