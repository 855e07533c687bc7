"""Generated from ``_async_admin.py`` by ``scripts/unasync.py``: do not edit."""

from __future__ import annotations

from collections.abc import Callable
from typing import ParamSpec, TypeVar

from memstrata.api._sync_base import SubAPI
from memstrata.config import Settings
from memstrata.errors import ConfigurationError
from memstrata.nodes import ops as nodes_ops
from memstrata.nodes.sealed import seal_clear
from memstrata.nodes.service import blobs_for
from memstrata.runtime import Runtime
from memstrata.storage.plan import Op

__all__ = ["Admin"]

P = ParamSpec("P")
T = TypeVar("T")


class Admin(SubAPI):
    """What operators, the surfaces and test kits ask of the memory itself rather than of
    its data (the CLI's ``doctor`` and ``migrate``, the server's readiness, benchmarks, the
    backend conformance suite)."""

    @property
    def settings(self) -> Settings:
        """The settings this memory was opened with."""
        return self._core.settings

    @property
    def runtime(self) -> Runtime:
        """The run-time pieces the features share: tokenizer, limits, cascade, clock, ids."""
        return self._core.rt

    @property
    def dialect(self) -> str:
        """The store's SQL dialect: ``sqlite`` or ``postgres``."""
        return self._core.engine.dialect

    @property
    def location(self) -> str:
        """Where the store is (a file path, or the server and database), without secrets."""
        return self._core.engine.location

    @property
    def redis_url(self) -> str | None:
        """The Redis this memory coordinates through (locks, wake-ups), if any."""
        return self._core.redis_url

    def schema_version(self) -> int:
        """The newest schema migration applied to the store."""
        return self._core.schema_version()

    def migrate(self) -> list[int]:
        """Apply the schema migrations still pending (another process may have added some
        since this memory opened); returns the versions applied."""
        return self._core.migrate()

    def check(self, timeout_s: float | None = None) -> dict[str, str]:
        """Ask every configured backend for a trivial answer: ``{name: "ok" | reason}``;
        past ``timeout_s`` the answer says they did not answer in time."""
        return self._core.check(timeout_s)

    def read(self, make: Callable[P, Op[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run the sans-IO operation ``make(*args, **kwargs)`` in a read transaction (tools
        and test kits that inspect the store; ``?`` placeholders in its statements)."""
        return self._read(make, *args, **kwargs)

    def write(self, make: Callable[P, Op[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``make(*args, **kwargs)`` in a write transaction (all of it or none)."""
        return self._write(make, *args, **kwargs)

    def seal_node_objects(self) -> int:
        """Seal every node memory object still in clear in the blob store (objects written
        before encryption at rest was on: ``memstrata encrypt --all``); returns how many.
        Node memories are read from the index, so only objects a node memory names are
        reached (orphans are the garbage collector's)."""
        sealer = self._core.sealer
        if sealer is None:
            raise ConfigurationError("encryption at rest is off: there is no key to seal with")
        owned = self._read(nodes_ops.owners)
        if not owned:
            return 0
        blobs = blobs_for(self._core)
        if_match = blobs.capabilities.if_match
        n = 0
        for user, key in owned:
            n += blobs.run(
                seal_clear(key.root(), sealer, key.tenant, user, if_match=if_match)
            )
        return n
