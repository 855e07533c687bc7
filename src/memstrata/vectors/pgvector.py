"""Approximate cosine search with pgvector's HNSW index on PostgreSQL.

The ``vectors`` table stays the source of truth; each space (embedder identity,
dimension) gets a derived table ``vectors_hnsw_<hash>`` with a ``vector(dim)``
column, the scope columns (so filters need no join) and an HNSW index with
``vector_cosine_ops``. It is created on first use, only where the extension
exists, so migrations never depend on it. Its rows reference ``vectors(id)``
with ``ON DELETE CASCADE``: the deletion cascade and replace-by-id only touch
``vectors`` and the derived rows follow. Opening the index copies in any rows
of the space that are missing (vectors written before the extension appeared,
or by an exact index), so the derived table catches up by itself. The cost of
this design is that each vector is stored twice (bytes and ``vector``).

The extension may live in any schema: type, operator and operator class are
always schema-qualified, so it works whatever ``search_path`` says.

With pgvector >= 0.8 searches use iterative index scans, so a scope filter that
discards most of the graph's nearest neighbours still yields ``k`` results; on
older versions a user with few vectors among many can get fewer than ``k``
(the planner usually picks the owner index and an exact sort for such users).
"""

from __future__ import annotations

import hashlib
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from functools import lru_cache
from typing import Any

import numpy as np
import numpy.typing as npt

from memstrata.storage.engine import Engine
from memstrata.storage.plan import Exec, Op, Query
from memstrata.storage.sql import BATCH, now_micros, placeholders
from memstrata.types import Scope
from memstrata.vectors.port import (
    MAX_K,
    IndexKind,
    PlannedIndex,
    Space,
    Vector,
    VectorHit,
    VectorItem,
    check_search_args,
    clip,
    prepare,
    rank,
    register_space,
    scope_filter,
    unit_vector,
    write_rows,
)

__all__ = ["HNSW_MAX_DIM", "PgvectorIndex", "PgvectorInfo", "index_table"]

#: pgvector's HNSW index takes ``vector`` columns of at most this many dimensions.
HNSW_MAX_DIM = 2000
#: Default ``hnsw.ef_search``: the candidate list size of a search (pgvector's own is 40).
DEFAULT_EF_SEARCH = 100


@dataclass(frozen=True, slots=True)
class PgvectorInfo:
    """The installed extension: its version and the schema that holds its objects."""

    version: str
    schema: str

    @property
    def version_tuple(self) -> tuple[int, ...]:
        parts: list[int] = []
        for piece in self.version.split("."):
            digits = "".join(ch for ch in piece if ch.isdigit())
            parts.append(int(digits or 0))
        return tuple(parts)

    @property
    def has_hnsw(self) -> bool:
        return self.version_tuple >= (0, 5, 0)

    @property
    def has_iterative_scan(self) -> bool:
        return self.version_tuple >= (0, 8, 0)


def quote_ident(name: str) -> str:
    return '"' + name.replace('"', '""') + '"'


def index_table(space: Space) -> str:
    """A stable, injection-proof table name for a space (identities may hold any text)."""
    digest = hashlib.sha256(f"{space.embedder}\x00{space.dim}".encode()).hexdigest()[:16]
    return f"vectors_hnsw_{digest}"


@lru_cache(maxsize=64)
def _format(dim: int) -> str:
    # 9 significant digits round-trip every float32 exactly.
    return "[" + ",".join(["%.9g"] * dim) + "]"


def vector_text(unit: npt.NDArray[np.float32]) -> str:
    """pgvector's text input form; parameters travel as text, so no adapter is needed."""
    return _format(unit.shape[0]) % tuple(unit.tolist())


class PgvectorIndex(PlannedIndex):
    """HNSW search through pgvector; build with :func:`memstrata.vectors.detect.open_vector_index`."""

    kind: IndexKind = "pgvector-hnsw"

    def __init__(
        self,
        engine: Engine,
        space: Space,
        info: PgvectorInfo,
        *,
        ef_search: int = DEFAULT_EF_SEARCH,
        clock: Callable[[], int] = now_micros,
    ) -> None:
        super().__init__(engine, space, clock=clock)
        self.info = info
        self.ef_search = ef_search
        self.table = index_table(space)
        schema = quote_ident(info.schema)
        self._vector_type = f"{schema}.vector"
        self._distance = f"OPERATOR({schema}.<=>)"
        self._opclass = f"{schema}.vector_cosine_ops"

    # -- set-up --------------------------------------------------------------------------

    def ensure_op(self) -> Op[int]:
        """Create the derived table and its indexes if needed, and copy in missing rows.

        Serialised per schema and table by an advisory lock, so processes that start
        together do not race on ``CREATE``. Returns how many rows were copied.
        """
        t = self.table
        yield Query("SELECT pg_advisory_xact_lock(hashtext(current_schema() || ':' || ?))", (t,))
        yield from register_space(self.space, self.clock(), index_table=t)
        yield Exec(
            f"CREATE TABLE IF NOT EXISTS {t} ("
            "id TEXT PRIMARY KEY REFERENCES vectors (id) ON DELETE CASCADE, "
            "tenant_id TEXT NOT NULL, user_id TEXT NOT NULL, agent_id TEXT NOT NULL, "
            "conversation_id TEXT, message_id TEXT, "
            f"embedding {self._vector_type}({self.space.dim}) NOT NULL)"
        )
        yield Exec(f"CREATE INDEX IF NOT EXISTS {t}_owner ON {t} (tenant_id, user_id, agent_id)")
        copied = yield from self._backfill()
        if copied:  # fresh statistics, so the planner weighs the HNSW index correctly
            yield Exec(f"ANALYZE {t}")
        # Built after the copy: building over loaded rows is much faster than row by row.
        yield Exec(
            f"CREATE INDEX IF NOT EXISTS {t}_hnsw ON {t} USING hnsw (embedding {self._opclass})"
        )
        return copied

    def _backfill(self) -> Op[int]:
        copied, after = 0, ""
        while True:
            rows = yield Query(
                "SELECT v.id, v.tenant_id, v.user_id, v.agent_id, v.conversation_id, "
                "v.message_id, v.vector FROM vectors v "
                "WHERE v.embedder = ? AND v.dim = ? AND v.id > ? "
                f"AND NOT EXISTS (SELECT 1 FROM {self.table} p WHERE p.id = v.id) "
                "ORDER BY v.id LIMIT ?",
                (self.space.embedder, self.space.dim, after, BATCH),
            )
            if not rows:
                return copied
            batch = [(*r[:6], np.frombuffer(r[6], dtype="<f4")) for r in rows]
            yield from self._insert(batch)
            copied += len(rows)
            after = rows[-1][0]

    def _insert(self, rows: Sequence[tuple[Any, ...]]) -> Op[None]:
        """Rows of (id, tenant, user, agent_key, conversation, message, unit vector)."""
        params: list[Any] = []
        for r in rows:
            params += [*r[:6], vector_text(r[6])]
        value = f"(?, ?, ?, ?, ?, ?, CAST(? AS {self._vector_type}))"
        yield Exec(
            f"INSERT INTO {self.table} (id, tenant_id, user_id, agent_id, conversation_id, "
            f"message_id, embedding) VALUES {', '.join([value] * len(rows))}",
            params,
        )

    # -- operations ----------------------------------------------------------------------

    def add_op(self, items: Sequence[VectorItem]) -> Op[int]:
        prepared = prepare(items, self.space.dim)
        now = self.clock()
        for start in range(0, len(prepared), BATCH):
            batch = prepared[start : start + BATCH]
            yield from write_rows(self.space, batch, now)
            yield from self._insert(
                [
                    (
                        p.item.id,
                        p.item.scope.tenant,
                        p.item.scope.user,
                        p.item.scope.agent_key,
                        p.item.conversation_id,
                        p.item.message_id,
                        p.unit,
                    )
                    for p in batch
                ]
            )
        return len(prepared)

    def search_op(
        self,
        scope: Scope,
        query: Vector,
        k: int = 10,
        *,
        conversation_id: str | None = None,
        exclude_message_ids: Iterable[str] = (),
    ) -> Op[list[VectorHit]]:
        q = unit_vector(query, self.space.dim, field="query")
        excluded = sorted(check_search_args(k, exclude_message_ids))
        where, filters = scope_filter(scope)
        # Transaction-local settings: they end with this search's read transaction.
        ef = min(MAX_K, max(self.ef_search, k))
        yield Query("SELECT set_config('hnsw.ef_search', ?, true)", (str(ef),))
        if self.info.has_iterative_scan:
            # Keep walking the graph while the scope filter discards neighbours; the
            # relaxed order is put right by rank() below.
            yield Query("SELECT set_config('hnsw.iterative_scan', 'relaxed_order', true)")
        sql = (
            f"SELECT id, message_id, conversation_id, "
            f"embedding {self._distance} CAST(? AS {self._vector_type}) AS distance "
            f"FROM {self.table} WHERE {where}"
        )
        params: list[Any] = [vector_text(q), *filters]
        if conversation_id is not None:
            sql += " AND conversation_id = ?"
            params.append(conversation_id)
        if excluded:
            sql += f" AND message_id NOT IN ({placeholders(len(excluded))})"
            params += excluded
        rows = yield Query(sql + " ORDER BY distance LIMIT ?", [*params, k])
        hits = [VectorHit(r[0], r[1], r[2], clip(1.0 - float(r[3]))) for r in rows]
        return rank(hits, k)
