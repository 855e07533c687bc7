"""The recall tier's relevance gate (pure): is there relevant memory at all, how much of
it to offer, and does each candidate carry evidence of its own?

Fusion ranks candidates by rank agreement, which says nothing about whether the best
of them is relevant at all: some message is always the nearest. The gate judges on
absolute evidence instead, at two levels.

The query: its *strength* is the best cosine similarity of a candidate to the query
(in the embedder's space) plus ``keyword_weight`` times the best keyword coverage (the
share of the query's idf mass one message matches, scope-local statistics, see
:mod:`memstrata.recall.scoring`). Below ``floor`` nothing is relevant; from ``full`` the
tier offers up to its ``k`` messages; in between only the best ``weak_k`` (a weak match
costs a few lines, not the whole budget). A message matching ``keyword_floor`` of the
query's idf mass is strong on its own (and is the only test without an embedder).

Each candidate: ``keyword / item_keyword + vector_excess / vector_span`` must reach
``companion_floor``, where the vector part counts only above ``vector_base`` (unrelated
text sits near it for a sentence embedder): a weaker match beside a strong one is usually
the same topic (the other half of an exchange, a later mention), an unrelated one is not.

The defaults were chosen with ``memstrata bench context-quality`` on LoCoMo dev data
(docs/benchmarks.md, "Calibration").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["RelevanceGate"]


@dataclass(frozen=True, slots=True)
class RelevanceGate:
    #: Weight of the best keyword coverage in the query's strength.
    keyword_weight: float = 0.2
    #: Strength below which nothing is relevant.
    floor: float = 0.51
    #: Strength from which the tier offers all it may (``k``); below, ``weak_k``.
    full: float = 0.59
    #: Most messages offered for a strength between ``floor`` and ``full``.
    weak_k: int = 8
    #: Keyword coverage that makes a query strong on its own (with or without vectors).
    keyword_floor: float = 0.625
    #: Keyword coverage worth one unit of a candidate's evidence.
    item_keyword: float = 0.5
    #: Cosine similarity below which the vector adds no evidence to a candidate.
    vector_base: float = 0.25
    #: Cosine similarity above ``vector_base`` worth one unit of a candidate's evidence.
    vector_span: float = 0.25
    #: Evidence every admitted candidate needs.
    companion_floor: float = 0.25

    def evidence(self, coverage: float, similarity: float | None) -> float:
        """One candidate's own evidence."""
        e = coverage / self.item_keyword if self.item_keyword > 0 else 0.0
        if similarity is not None and self.vector_span > 0:
            e += max(similarity - self.vector_base, 0.0) / self.vector_span
        return e

    def limit(self, best_coverage: float, best_similarity: float | None) -> int | None:
        """How many candidates the query may bring: 0 (below the floor), ``weak_k``, or
        None (no limit but the tier's own ``k``)."""
        if best_coverage >= self.keyword_floor:
            return None
        if best_similarity is None:
            return 0
        strength = best_similarity + self.keyword_weight * best_coverage
        if strength >= self.full:
            return None
        return self.weak_k if strength >= self.floor else 0

    def admit(
        self,
        evidence: Sequence[float],
        best_coverage: float,
        best_similarity: float | None,
    ) -> list[bool]:
        """Which of the candidates (their evidence, best ranked first) go in."""
        allowed = self.limit(best_coverage, best_similarity)
        out: list[bool] = []
        taken = 0
        for e in evidence:
            ok = (allowed is None or taken < allowed) and e >= self.companion_floor
            taken += ok
            out.append(ok)
        return out
