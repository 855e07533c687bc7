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

A candidate that *stands out* is admitted however weak the query looks: its cosine is
at least ``standout_cosine`` and lies ``standout_floor`` above the query's background
in the scope (:func:`memstrata.recall.relevance.background`). A store of unrelated
notes answers "What breed is my dog?" with one note far above the rest (a cosine
0.49, background 0.07), well below the floor that keeps a chat about other people
out; in such a chat few messages stand out that far (the 99th percentile is 0.19 on
LoCoMo dev, asked of another conversation, and fewer still reach the cosine as well).
At most ``standout_k`` come in that way.

A query in the first person ("Can I have a beer with dinner?") asks about
the user's own life or work, which a past statement of theirs usually answers in other
words ("I gave up drinking last spring.": a cosine near 0.3, below every floor above).
When such a query's best match has a cosine of at least ``personal_cosine`` and stands
``personal_standout`` above the background, of its candidates with a cosine of at least
``personal_companion`` the ``personal_k`` best ranked and the ``personal_k`` nearest come
in: a few lines of memory at worst. Both, because fused rank carries the keywords (a
statement naming "the startup" for "the startup I work at") and cosine the meaning
(fusion can rank messages sharing a word with the question above the statement that
answers it in other words). On three sets of first-person statements the right one is
among the three nearest for 66 of 68 questions, the nearest for 58 (docs/benchmarks.md).

The floors were chosen with ``memstrata bench context-quality`` on LoCoMo dev data
(docs/benchmarks.md, "Calibration"); the standout path with ``bench recall-natural``
and context-quality together (every setting from 0.2 to 0.3 above background and
0.35 to 0.42 cosine gives the same results on both), then lowered from 0.25 to 0.18
above background on sets written blind, questions asked without a first-person word
("What day does the pager get handed over?", 0.21 above) among them; a set written
after that choice gained from it too, and context-quality's off-topic tokens moved by
0.2 (docs/benchmarks.md, "Natural recall on sets written blind").
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

__all__ = [
    "ADMITTED",
    "BELOW_FLOOR",
    "NO_EVIDENCE",
    "OVER_WEAK_LIMIT",
    "STANDS_OUT",
    "RelevanceGate",
]

#: A strong enough query: the candidate has evidence of its own.
ADMITTED = "admitted"
#: A weak query but the candidate stands far above the query's background.
STANDS_OUT = "stands out"
#: Why not: the query as a whole is below the floor.
BELOW_FLOOR = "below relevance floor"
#: Why not: the query passed, this candidate has too little evidence of its own.
NO_EVIDENCE = "no evidence of its own"
#: A first-person query's best match.
PERSONAL = "first-person query's best match"
#: Why not: a weak query brings only its best few.
OVER_WEAK_LIMIT = "beyond a weak query's best few"


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
    #: How far above the query's background a candidate stands out.
    standout_floor: float = 0.18
    #: Least cosine of a candidate that stands out.
    standout_cosine: float = 0.35
    #: Most candidates admitted for standing out.
    standout_k: int = 3
    #: Least cosine of a first-person query's best match.
    personal_cosine: float = 0.2
    #: How far above the background a first-person query's best match must be.
    personal_standout: float = 0.08
    #: Most candidates admitted as a first-person query's best matches.
    personal_k: int = 3
    #: Least cosine of each of them.
    personal_companion: float = 0.15

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
        return [v == ADMITTED for v in self.verdicts(evidence, best_coverage, best_similarity)]

    def verdicts(
        self,
        evidence: Sequence[float],
        best_coverage: float,
        best_similarity: float | None,
        standouts: Sequence[tuple[float | None, float | None]] = (),
        *,
        personal: bool = False,
    ) -> list[str]:
        """Each candidate's verdict (best ranked first): :data:`ADMITTED`,
        :data:`STANDS_OUT`, :data:`PERSONAL` or why not. ``standouts``: each candidate's
        (cosine, cosine above the query's background); ``personal``: the query is in the
        first person."""
        allowed = self.limit(best_coverage, best_similarity)
        out: list[str] = []
        taken = stood = 0
        for i, e in enumerate(evidence):
            if allowed == 0:
                verdict = BELOW_FLOOR
            elif e < self.companion_floor:
                verdict = NO_EVIDENCE
            elif allowed is not None and taken >= allowed:
                verdict = OVER_WEAK_LIMIT
            else:
                verdict = ADMITTED
                taken += 1
            if verdict != ADMITTED and i < len(standouts) and stood < self.standout_k:
                cosine, above = standouts[i]
                if (
                    cosine is not None
                    and above is not None
                    and cosine >= self.standout_cosine
                    and above >= self.standout_floor
                ):
                    verdict = STANDS_OUT
                    stood += 1
            out.append(verdict)
        if personal:
            self._personal(out, standouts)
        return out

    def _personal(
        self, verdicts: list[str], standouts: Sequence[tuple[float | None, float | None]]
    ) -> None:
        """A first-person query whose best match is close enough brings, of its candidates
        with a cosine of ``personal_companion`` or more, the ``personal_k`` best ranked and
        the ``personal_k`` nearest."""
        pairs = [(c, a) for c, a in standouts[: len(verdicts)] if c is not None and a is not None]
        if not pairs:
            return
        best = max(pairs)
        if best[0] < self.personal_cosine or best[1] < self.personal_standout:
            return
        close = [
            (c, i)
            for i, (c, _) in enumerate(standouts[: len(verdicts)])
            if c is not None and c >= self.personal_companion
        ]
        ranked = [i for _, i in close[: self.personal_k]]
        # Nearest first; of equal cosines, the better ranked.
        nearest = [i for _, i in sorted(close, key=lambda ci: (-ci[0], ci[1]))[: self.personal_k]]
        for i in {*ranked, *nearest}:
            if verdicts[i] not in (ADMITTED, STANDS_OUT):
                verdicts[i] = PERSONAL
