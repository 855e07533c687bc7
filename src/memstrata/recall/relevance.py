"""How relevant one recalled message is to a query: a calibrated probability (pure).

Fusion ranks by rank agreement and says nothing absolute; cosine similarity alone
means different things in different stores (a chat about one couple's life puts most
messages near any question about them, a store of unrelated personal notes puts the
one right note far above the rest). So relevance looks at three signals of a
candidate, all of them computed without data from anyone but the caller:

- ``cosine``: its similarity to the query in the embedder's space;
- ``standout``: how far that similarity lies above the query's *background* in this
  scope, the mean similarity of its 2nd to 21st nearest messages (how close this store
  comes to the query anyway);
- ``coverage``: the share of the query's idf mass the message matches (keywords).

:class:`RelevanceModel` maps them to a probability with a logistic model fitted on two
dissimilar development sets, each weighted equally: two-person dialogue (LoCoMo, the
evidence turns of 883 questions, and the same questions asked of another
conversation) and first-person statements asked about in other words (24 questions
and 8 unrelated ones). Fitted on either set alone, it ranks the other set's relevant
messages first with an AUC of 0.82 (dialogue) and 0.99 (statements); see
docs/benchmarks.md, "recall-natural", for the fit and its reliability table. Without a
vector (keyword recall only) a model on coverage alone is used.
"""

from __future__ import annotations

import math
from collections.abc import Sequence
from dataclasses import dataclass

__all__ = ["BACKGROUND_PRIOR", "RelevanceModel", "Signals", "background", "reported"]

#: Ranks (1-based, by similarity) whose mean similarity is a query's background.
BACKGROUND_FROM, BACKGROUND_TO = 2, 21
#: Fewest similarities a background is measured from; below it, the prior is used.
BACKGROUND_MIN = 5
#: Background assumed for a scope too small to measure one (a typical value for a
#: store of unrelated notes with the default embedder).
BACKGROUND_PRIOR = 0.15


def background(similarities: Sequence[float]) -> float:
    """A query's background similarity in a scope, from its candidates' similarities
    (any order): the mean of the 2nd to 21st highest, or the prior when there are too few."""
    ranked = sorted(similarities, reverse=True)[BACKGROUND_FROM - 1 : BACKGROUND_TO]
    if len(ranked) < BACKGROUND_MIN:
        return BACKGROUND_PRIOR
    return sum(ranked) / len(ranked)


@dataclass(frozen=True, slots=True)
class Signals:
    """What is known of one candidate (``cosine`` None: no vector for it or the query)."""

    coverage: float
    cosine: float | None
    background: float = BACKGROUND_PRIOR

    @property
    def standout(self) -> float | None:
        return None if self.cosine is None else self.cosine - self.background


def reported(relevance: float) -> float:
    """A relevance as answers carry it: 4 decimals, and below 1 (a logistic never reaches
    1, so rounding must not make a hit pass ``min_relevance=1``)."""
    return min(round(relevance, 4), 0.9999)


def _logistic(z: float) -> float:
    if z >= 0:
        return 1.0 / (1.0 + math.exp(-z))
    e = math.exp(z)
    return e / (1.0 + e)


@dataclass(frozen=True, slots=True)
class RelevanceModel:
    """Logistic relevance; the coefficients are the fit described above."""

    bias: float = -5.862
    cosine: float = 2.491
    standout: float = 12.263
    coverage: float = 4.779
    #: The keyword-only model (no vector for the candidate or the query).
    keyword_bias: float = -5.033
    keyword_coverage: float = 6.909

    def __call__(self, s: Signals) -> float:
        if s.cosine is None:
            return _logistic(self.keyword_bias + self.keyword_coverage * s.coverage)
        z = (
            self.bias
            + self.cosine * s.cosine
            + self.standout * (s.cosine - s.background)
            + self.coverage * s.coverage
        )
        return _logistic(z)
