"""The relational engine port: what features and the facade need from a database backend.

Backends (:mod:`memstrata.backends.sqlite`, :mod:`memstrata.backends.postgres`) implement it;
:func:`memstrata.backends.registry.open_engine` picks one by URL. Code above the backends
depends on this protocol only, never on a backend module.
"""

from __future__ import annotations

from typing import Protocol, TypeVar, runtime_checkable

from memstrata.storage.plan import Plan

__all__ = ["Engine", "Pingable"]

T = TypeVar("T")


class Engine(Protocol):
    """A relational backend: runs sans-IO plans, sync or async, each in one transaction."""

    dialect: str
    location: str

    def run(self, plan: Plan[T]) -> T: ...

    async def arun(self, plan: Plan[T]) -> T: ...

    def migrate(self) -> list[int]: ...

    def schema_version(self) -> int: ...

    def close(self) -> None: ...

    @property
    def closed(self) -> bool: ...

    async def aclose(self) -> None: ...


@runtime_checkable
class Pingable(Protocol):
    """An engine that answers readiness itself, without waiting on its pool (PostgreSQL:
    a direct connection with a short timeout)."""

    def ping(self) -> None: ...
