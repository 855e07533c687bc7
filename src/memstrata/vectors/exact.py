"""Exact cosine search with numpy over the relational ``vectors`` table.

The default on SQLite, and the fallback on PostgreSQL without pgvector. A search
reads every vector of the scope in the index's space (one indexed range of
``vectors_owner``) and scores them with one matrix-vector product, so its cost
grows linearly with that user's vector count: ``n * dim * 4`` bytes read and
``n * dim`` multiply-adds per search (20,000 vectors of 384 dimensions are about
30 MB). That is fine for the embedded default, where one user's history is
modest; a large multi-user deployment wants PostgreSQL with pgvector.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Any

import numpy as np

from memstrata.errors import Corruption
from memstrata.storage.plan import Op, Query
from memstrata.storage.sql import BATCH
from memstrata.types import Scope
from memstrata.vectors.port import (
    IndexKind,
    PlannedIndex,
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

__all__ = ["ExactIndex"]


class ExactIndex(PlannedIndex):
    """Brute-force cosine similarity; exact by construction, the reference for the others."""

    kind: IndexKind = "exact"

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
        where, params = scope_filter(scope)
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
