"""An engine that runs every plan with a sealer active (encryption at rest).

The row codecs seal and open texts through :mod:`memstrata.sealing`, which reads the
active sealer from a context variable; this wrapper sets it around each plan, so the
features' operations need no extra argument. Everything else is the wrapped engine's.
"""

from __future__ import annotations

from typing import Any, TypeVar

from memstrata.sealing import KeyringError, Sealer, using
from memstrata.storage.engine import Engine
from memstrata.storage.plan import Exec, Op, Plan, Query, write

__all__ = ["SealedEngine", "bind_keyring"]

T = TypeVar("T")


def bind_keyring(keyring_id: str) -> Op[None]:
    """Tie the store to ``keyring_id`` on its first encrypted open; later opens must bring
    the same keyring. Another keyring would open none of the sealed texts, and a text whose
    key is not found reads as deleted: without this check a wrong ``MEMSTRATA_KEYRING``
    would look like every user had been erased."""
    rows = yield Query("SELECT keyring_id FROM store_keyring")
    known = {str(r[0]) for r in rows}
    if not known:
        yield Exec("INSERT INTO store_keyring (keyring_id) VALUES (?)", (keyring_id,))
    elif keyring_id not in known:
        raise KeyringError(
            f"this store is sealed with keyring {sorted(known)[0]}, but MEMSTRATA_KEYRING "
            f"holds keyring {keyring_id}: point it at the store's keyring"
        )


class SealedEngine:
    """``engine`` with ``sealer`` active while each plan runs (checked, on construction,
    to be the keyring the store is sealed with)."""

    def __init__(self, engine: Engine, sealer: Sealer) -> None:
        self.inner = engine
        self.sealer = sealer
        self.dialect = engine.dialect
        self.location = engine.location
        if sealer.keyring_id is not None:
            self.run(write(lambda: bind_keyring(str(sealer.keyring_id))))

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
