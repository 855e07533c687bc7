"""The recall tier's relevance gate (pure): does a candidate carry evidence of its own?

Fusion ranks candidates by rank agreement, which says nothing about whether the best
of them is relevant at all: some message is always the nearest. The gate judges each
candidate on absolute evidence instead:

- keyword: the share of the query's idf mass the message matches (scope-local
  statistics, see :mod:`memstrata.recall.scoring`), 0..1;
- vector: the cosine similarity of the message to the query in the embedder's space.

A candidate's evidence is ``keyword / keyword_floor + vector_excess / vector_span``,
where the vector part counts only above ``vector_base`` (unrelated text sits near it
for a sentence embedder). The query has relevant memory at all only when its best
candidate reaches ``floor``; then the others join from ``companion_floor`` (a weaker
match beside a strong one is usually the same topic: the other half of an exchange, a
later mention). With no embedder the keyword part decides alone. The defaults were
chosen with ``memstrata bench context-quality`` on LoCoMo dev data (docs/benchmarks.md).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["RelevanceGate"]


@dataclass(frozen=True, slots=True)
class RelevanceGate:
    #: Keyword coverage worth one unit of evidence.
    keyword_floor: float = 0.5
    #: Cosine similarity below which the vector adds no evidence.
    vector_base: float = 0.25
    #: Cosine similarity above ``vector_base`` worth one unit of evidence.
    vector_span: float = 0.25
    #: Evidence the best candidate needs, or nothing is relevant.
    floor: float = 1.25
    #: Evidence every other candidate needs once the best one cleared ``floor``.
    companion_floor: float = 0.25

    def evidence(self, coverage: float, similarity: float | None) -> float:
        e = coverage / self.keyword_floor if self.keyword_floor > 0 else 0.0
        if similarity is not None and self.vector_span > 0:
            e += max(similarity - self.vector_base, 0.0) / self.vector_span
        return e

    def admit(self, evidence: Sequence[float]) -> list[bool]:
        """Which of the candidates (their evidence, any order) go in."""
        if not evidence or max(evidence) < self.floor:
            return [False] * len(evidence)
        return [e >= self.companion_floor for e in evidence]
