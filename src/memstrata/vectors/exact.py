"""Exact cosine search with numpy over the relational ``vectors`` table.

The default on SQLite, and the fallback on PostgreSQL without pgvector. A search
scores every vector of the scope in the index's space with one matrix-vector product:
``n * dim`` multiply-adds (100k vectors of 384 dimensions: ~5 ms on one core, bound by
reading 150 MB of memory).

Reading those vectors from the store costs far more than scoring them (``n * dim * 4``
bytes of rows per search), so each user's matrix is kept in memory
(:mod:`memstrata.vectors.matrices`, ``MEMSTRATA_VECTOR_CACHE_MB``) and checked against the
owner's version row before use: one indexed row read when nothing changed, the new rows
when vectors were only added, a full read after a deletion. A user found too large for
the cache, and the cache off (0), read the scope's rows at every search, as before. A large multi-user deployment still wants PostgreSQL with
pgvector.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from typing import Any

import numpy as np
import numpy.typing as npt

from memstrata.errors import Corruption
from memstrata.storage.engine import Engine
from memstrata.storage.plan import Op, Query
from memstrata.storage.sql import BATCH, now_micros
from memstrata.types import Scope
from memstrata.vectors.matrices import MatrixCache, OwnerMatrix, Stamp
from memstrata.vectors.port import (
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
    scope_filter,
    unit_vector,
    write_rows,
)

__all__ = ["DEFAULT_CACHE_BYTES", "ExactIndex"]

DEFAULT_CACHE_BYTES = 256 * 2**20

_ROWS = "SELECT id, message_id, conversation_id, agent_id, vector FROM vectors WHERE "
_OWNER = "tenant_id = ? AND user_id = ? AND embedder = ? AND dim = ? AND version <= ?"


class ExactIndex(PlannedIndex):
    """Brute-force cosine similarity; exact by construction, the reference for the others."""

    kind: IndexKind = "exact"

    def __init__(
        self,
        engine: Engine,
        space: Space,
        *,
        clock: Callable[[], int] = now_micros,
        cache_bytes: int = DEFAULT_CACHE_BYTES,
    ) -> None:
        super().__init__(engine, space, clock=clock)
        self.cache = MatrixCache(space.dim, cache_bytes)

    def forget_owner(self, tenant: str, user: str) -> None:
        self.cache.drop((tenant, user))

    def _matrix(self, scope: Scope) -> Op[OwnerMatrix | None]:
        """The scope's owner matrix, current as of this transaction (kept for the next
        search when it fits the cache); None for an owner known to be too large for it."""
        owner = (scope.tenant, scope.user)
        found = yield Query(
            "SELECT epoch, version, deleted_version FROM vector_owners "
            "WHERE tenant_id = ? AND user_id = ?",
            owner,
        )
        stamp: Stamp = (
            (str(found[0][0]), int(found[0][1]), int(found[0][2])) if found else (None, 0, 0)
        )
        if self.cache.oversized(owner, stamp):
            return None
        entry = self.cache.get(owner)
        if entry is not None and entry.current(stamp):
            return entry
        space = [self.space.embedder, self.space.dim]
        if entry is not None and entry.extendable(stamp):
            rows = yield Query(
                f"{_ROWS}{_OWNER} AND version > ? ORDER BY version, id",
                (*owner, *space, stamp[1], entry.stamp[1]),
            )
            return self.cache.extend(owner, entry, stamp, rows)
        rows = yield Query(f"{_ROWS}{_OWNER} ORDER BY version, id", (*owner, *space, stamp[1]))
        return self.cache.load(owner, stamp, rows)

    def add_op(self, items: Sequence[VectorItem]) -> Op[int]:
        prepared = prepare(items, self.space.dim)
        now = self.clock()
        for start in range(0, len(prepared), BATCH):
            yield from write_rows(self.space, prepared[start : start + BATCH], now)
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
        excluded = check_search_args(k, exclude_message_ids)
        where, params = scope_filter(scope)  # checks the scope too
        if self.cache.enabled:
            owned = yield from self._matrix(scope)
            if owned is not None:
                return _top(owned, q, k, scope, conversation_id, excluded)
        sql = (
            "SELECT id, message_id, conversation_id, vector FROM vectors "
            f"WHERE {where} AND embedder = ? AND dim = ?"
        )
        params += [self.space.embedder, self.space.dim]
        if conversation_id is not None:
            sql += " AND conversation_id = ?"
            params.append(conversation_id)
        rows: list[tuple[Any, ...]] = yield Query(sql, params)
        if excluded:  # in Python: no parameter limit, and the rows are read anyway
            rows = [r for r in rows if r[1] not in excluded]
        if not rows:
            return []
        data = b"".join(r[3] for r in rows)
        if len(data) != len(rows) * self.space.dim * 4:
            raise Corruption(
                f"a stored vector of {self.space.embedder!r} does not have {self.space.dim} "
                "float32 values"
            )
        matrix = np.frombuffer(data, dtype="<f4").reshape(len(rows), self.space.dim)
        # einsum, not matmul: a matrix-vector product gains nothing from BLAS threads,
        # and on a busy machine their start-up costs more than the product itself.
        scores = np.einsum("ij,j->i", matrix, q)
        if len(rows) > k:
            # Top k in linear time; rank() orders those few.
            chosen: Iterable[int] = np.argpartition(-scores, k - 1)[:k].tolist()
        else:
            chosen = range(len(rows))
        hits = [
            VectorHit(rows[i][0], rows[i][1], rows[i][2], clip(float(scores[i]))) for i in chosen
        ]
        return rank(hits, k)


def _top(
    matrix: OwnerMatrix,
    q: npt.NDArray[np.float32],
    k: int,
    scope: Scope,
    conversation_id: str | None,
    excluded: frozenset[str],
) -> list[VectorHit]:
    scores = matrix.scores(q, agent=scope.agent, conversation_id=conversation_id, excluded=excluded)
    if len(scores) > k:
        chosen: Iterable[int] = np.argpartition(-scores, k - 1)[:k].tolist()
    else:
        chosen = range(len(scores))
    picked = list(chosen)
    # One conversion of the chosen scores to floats (exact: float32 to float64), not two
    # numpy scalar reads per row; rows a filter turned away score -inf.
    values = scores[picked].tolist()
    kept = [(i, s) for i, s in zip(picked, values, strict=True) if s != -math.inf]
    names = matrix.rows([i for i, _ in kept])
    hits = [
        VectorHit(vid, mid, cid, clip(s))
        for (vid, mid, cid), (_, s) in zip(names, kept, strict=True)
    ]
    return rank(hits, k)
