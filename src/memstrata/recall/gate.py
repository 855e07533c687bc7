"""The recall tier's relevance gate (pure): does a candidate carry evidence of its own?

Fusion ranks candidates by rank agreement, which says nothing about whether the best
of them is relevant at all: some message is always the nearest. The gate judges each
candidate on absolute evidence instead:

- keyword: the share of the query's idf mass the message matches (scope-local
  statistics, see :mod:`memstrata.recall.scoring`), 0..1;
- vector: the cosine similarity of the message to the query in the embedder's space.

A candidate clears the floor when either alone is strong, or both together are:
``keyword / keyword_floor + vector_excess / vector_span >= 1`` where the vector part
counts only above ``vector_base`` (unrelated text sits near it for a sentence
embedder). With no embedder the keyword part decides alone. The defaults were chosen
with ``memstrata bench context-quality`` (docs/benchmarks.md).
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["RelevanceGate"]


@dataclass(frozen=True, slots=True)
class RelevanceGate:
    #: Keyword coverage that clears the floor on its own.
    keyword_floor: float = 0.5
    #: Cosine similarity below which the vector adds no evidence.
    vector_base: float = 0.25
    #: Cosine similarity above ``vector_base`` that clears the floor on its own.
    vector_span: float = 0.25

    def evidence(self, coverage: float, similarity: float | None) -> float:
        """1.0 or more clears the floor."""
        e = coverage / self.keyword_floor if self.keyword_floor > 0 else 0.0
        if similarity is not None and self.vector_span > 0:
            e += max(similarity - self.vector_base, 0.0) / self.vector_span
        return e

    def clears(self, coverage: float, similarity: float | None) -> bool:
        return self.evidence(coverage, similarity) >= 1.0
