"""Which vector index a database supports, and the factory that opens it.

SQLite always gets the exact index. On PostgreSQL the ``vector`` extension is
used when it is installed, or when it is available and this role may create it
(``CREATE EXTENSION IF NOT EXISTS vector`` inside a savepoint, so a missing
extension or privilege only means the exact fallback). :class:`VectorCapability`
says which was chosen and why, for ``memstrata doctor`` and ``/readyz``.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from typing import Literal

from memstrata.errors import BackendUnavailable, ConfigurationError
from memstrata.storage.engine import Engine
from memstrata.storage.plan import Exec, Op, Query, write
from memstrata.storage.sql import now_micros
from memstrata.vectors.exact import DEFAULT_CACHE_BYTES, ExactIndex
from memstrata.vectors.pgvector import (
    DEFAULT_EF_SEARCH,
    HNSW_MAX_DIM,
    PgvectorIndex,
    PgvectorInfo,
)
from memstrata.vectors.port import IndexKind, PlannedIndex, Space, register_space

__all__ = [
    "Prefer",
    "VectorCapability",
    "adetect",
    "aopen_vector_index",
    "detect",
    "open_vector_index",
    "probe_op",
]

Prefer = Literal["auto", "exact", "pgvector"]

_EXTENSION = (
    "SELECT e.extversion, n.nspname FROM pg_extension e "
    "JOIN pg_namespace n ON n.oid = e.extnamespace WHERE e.extname = 'vector'"
)


@dataclass(frozen=True, slots=True)
class VectorCapability:
    """The index kind a database supports; ``reason`` is a sentence for operators."""

    kind: IndexKind
    reason: str
    pgvector: PgvectorInfo | None = None


def _first_line(exc: BaseException) -> str:
    text = str(exc).strip()
    return text.splitlines()[0] if text else type(exc).__name__


def probe_op(install: bool = True) -> Op[VectorCapability]:
    """Find pgvector, creating the extension when allowed; PostgreSQL only.

    Runs in a write transaction of its own. A failed ``CREATE EXTENSION`` is
    rolled back to a savepoint, so the transaction (and the caller) carry on.
    """
    rows = yield Query(_EXTENSION)
    if not rows and install:
        available = yield Query("SELECT 1 FROM pg_available_extensions WHERE name = 'vector'")
        if not available:
            return VectorCapability(
                "exact", "exact search: the vector extension is not available on this server"
            )
        failure: str | None = None
        yield Exec("SAVEPOINT memstrata_vector_probe")
        try:
            yield Exec("CREATE EXTENSION IF NOT EXISTS vector")
        except BackendUnavailable:
            raise
        except Exception as exc:  # no privilege, or a concurrent creator: look again below
            yield Exec("ROLLBACK TO SAVEPOINT memstrata_vector_probe")
            failure = _first_line(exc)
        else:
            yield Exec("RELEASE SAVEPOINT memstrata_vector_probe")
        rows = yield Query(_EXTENSION)
        if not rows:
            return VectorCapability(
                "exact", f"exact search: CREATE EXTENSION vector failed: {failure}"
            )
    if not rows:
        return VectorCapability("exact", "exact search: the vector extension is not installed")
    info = PgvectorInfo(version=str(rows[0][0]), schema=str(rows[0][1]))
    if not info.has_hnsw:
        return VectorCapability(
            "exact",
            f"exact search: pgvector {info.version} has no HNSW index (0.5.0 or later needed)",
            info,
        )
    return VectorCapability(
        "pgvector-hnsw", f"pgvector {info.version} (schema {info.schema}), HNSW index", info
    )


_SQLITE = VectorCapability("exact", "exact search with numpy (SQLite)")


def _other(engine: Engine) -> VectorCapability:
    return VectorCapability("exact", f"exact search with numpy ({engine.dialect})")


def detect(engine: Engine, *, install: bool = True) -> VectorCapability:
    """What ``engine`` supports; on PostgreSQL, creates the extension when it can."""
    if engine.dialect != "postgres":
        return _SQLITE if engine.dialect == "sqlite" else _other(engine)
    return engine.run(write(lambda: probe_op(install)))


async def adetect(engine: Engine, *, install: bool = True) -> VectorCapability:
    if engine.dialect != "postgres":
        return _SQLITE if engine.dialect == "sqlite" else _other(engine)
    return await engine.arun(write(lambda: probe_op(install)))


def _choose(
    capability: VectorCapability | None, space: Space, prefer: Prefer
) -> VectorCapability | None:
    """``None`` means "exact, no probe needed"; raises when pgvector is demanded but absent."""
    if prefer == "exact" or capability is None:
        return None
    if capability.kind == "pgvector-hnsw" and space.dim > HNSW_MAX_DIM:
        capability = VectorCapability(
            "exact",
            f"exact search: dimension {space.dim} is over HNSW's limit of {HNSW_MAX_DIM}",
            capability.pgvector,
        )
    if prefer == "pgvector" and capability.kind != "pgvector-hnsw":
        raise ConfigurationError(f"pgvector was asked for but is not usable: {capability.reason}")
    return capability


def _build(
    engine: Engine,
    space: Space,
    capability: VectorCapability | None,
    ef_search: int,
    clock: Callable[[], int],
    cache_bytes: int,
) -> PlannedIndex:
    index: PlannedIndex
    if (
        capability is not None
        and capability.pgvector is not None
        and capability.kind == "pgvector-hnsw"
    ):
        index = PgvectorIndex(engine, space, capability.pgvector, ef_search=ef_search, clock=clock)
        index.reason = capability.reason
        return index
    index = ExactIndex(engine, space, clock=clock, cache_bytes=cache_bytes)
    index.reason = capability.reason if capability is not None else "exact search (chosen)"
    return index


def _setup(index: PlannedIndex) -> Op[None]:
    if isinstance(index, PgvectorIndex):
        yield from index.ensure_op()
    else:
        yield from register_space(index.space, index.clock())


def open_vector_index(
    engine: Engine,
    space: Space,
    *,
    prefer: Prefer = "auto",
    ef_search: int = DEFAULT_EF_SEARCH,
    clock: Callable[[], int] = now_micros,
    cache_bytes: int = DEFAULT_CACHE_BYTES,
) -> PlannedIndex:
    """The best index ``engine`` supports for ``space``, set up and ready.

    ``prefer="exact"`` skips detection; ``prefer="pgvector"`` raises
    ConfigurationError when pgvector cannot be used. Opening records the space, so an
    identity already stored with another dimension is refused (InvalidInput).
    ``cache_bytes``: the exact index's in-memory matrices (0: read every search's rows).
    """
    capability = detect(engine) if prefer != "exact" else None
    index = _build(engine, space, _choose(capability, space, prefer), ef_search, clock, cache_bytes)
    engine.run(write(lambda: _setup(index)))
    return index


async def aopen_vector_index(
    engine: Engine,
    space: Space,
    *,
    prefer: Prefer = "auto",
    ef_search: int = DEFAULT_EF_SEARCH,
    clock: Callable[[], int] = now_micros,
    cache_bytes: int = DEFAULT_CACHE_BYTES,
) -> PlannedIndex:
    """:func:`open_vector_index` for async callers."""
    capability = await adetect(engine) if prefer != "exact" else None
    index = _build(engine, space, _choose(capability, space, prefer), ef_search, clock, cache_bytes)
    await engine.arun(write(lambda: _setup(index)))
    return index
