"""How often facts entered recorded prompts (memory health reads this through the core)."""

from __future__ import annotations

from collections.abc import Sequence

from memstrata.storage.plan import Op, Query
from memstrata.storage.sql import BATCH, placeholders
from memstrata.types import Scope

__all__ = ["fact_use_counts"]


def fact_use_counts(scope: Scope, fact_ids: Sequence[str]) -> Op[dict[str, int]]:
    """The number of recorded contexts of ``scope`` whose injected items include each fact
    id (linked to a reply or not); ids never injected are absent."""
    ids = sorted(set(fact_ids))
    counts: dict[str, int] = {}
    for start in range(0, len(ids), BATCH):
        batch = ids[start : start + BATCH]
        rows = yield Query(
            "SELECT i.item_id, count(DISTINCT r.id) FROM context_record_items i "
            "JOIN context_records r ON r.id = i.context_id "
            f"WHERE i.kind = 'fact' AND i.item_id IN ({placeholders(len(batch))}) "
            "AND r.tenant_id = ? AND r.user_id = ? AND r.agent_id = ? GROUP BY i.item_id",
            (*batch, scope.tenant, scope.user, scope.agent_key),
        )
        counts.update({r[0]: int(r[1]) for r in rows})
    return counts
