"""Hybrid ranking: keyword and vector candidates fused into one list (pure, no I/O).

1. Weighted reciprocal rank fusion of the two rankings (ranks, not raw scores: bm25
   and cosine live on unrelated scales).
2. Time awareness: when the query asks about time, candidates that mention a time
   (a date, a weekday, "yesterday", ...) are lifted.
3. Context: in a conversation the evidence is often split between a message and the
   one it answers, so part of each candidate's score flows to its direct neighbours
   (parent and children) and to the segment it belongs to (messages that happened
   together: the same ``occurred_at`` session).
4. Sessions: the keyword ranker also ranks the sessions the query's terms fall in
   (:func:`memstrata.recall.scoring.session_ranks`); a candidate gains a reciprocal-rank
   share of its session's rank, so a session that holds the question's words across
   several turns lifts its turns.
5. Windows: a third ranking, of the messages by the query terms held by their window
   (the message and the two written before and after it in its conversation,
   :class:`memstrata.recall.scoring.TermWindows`), fused like the other two, so a
   question whose words are split over a few turns finds each of them.

The defaults were tuned on synthetic conversations and checked on LoCoMo (see
docs/benchmarks.md); nothing here refers to any data set.
"""

from __future__ import annotations

from collections import defaultdict
from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TypeVar

__all__ = ["Candidate", "FusionParams", "fuse"]

K = TypeVar("K", str, tuple[str, str])


@dataclass(frozen=True, slots=True)
class FusionParams:
    # A small k trusts the top of each list more than the classic 60: with two good
    # rankers, agreement near the top is the strongest signal. (Search's defaults, chosen
    # with ``memstrata bench locomo``; the context's recall tier has its own.)
    rrf_k: float = 12.0
    keyword_weight: float = 1.4
    vector_weight: float = 1.0
    #: Multiplier for time-mentioning candidates of a time question.
    time_boost: float = 0.4
    #: Share of a neighbour's fused score a candidate receives (the window ranking
    #: carries most of what a neighbour says).
    neighbour_share: float = 0.1
    #: Share of its segment's best fused score a candidate receives.
    segment_share: float = 0.8
    #: Weight and reciprocal-rank k of the session ranking (0: off).
    session_weight: float = 0.25
    session_k: float = 6.0
    #: Weight of the window ranking in the fusion (0: off, and not computed).
    window_weight: float = 1.0


@dataclass(slots=True)
class Candidate:
    id: str
    conversation_id: str
    parent_id: str | None
    segment: tuple[str, int]
    mentions_time: bool = False
    keyword_rank: int | None = None
    vector_rank: int | None = None
    #: Rank of the candidate's session among those the query's terms fall in.
    session_rank: int | None = None
    #: Rank of the candidate by the query terms its window holds.
    window_rank: int | None = None
    score: float = field(default=0.0)


def fuse(
    candidates: Iterable[Candidate],
    *,
    temporal: bool,
    params: FusionParams = FusionParams(),
) -> list[Candidate]:
    """Score ``candidates`` in place and return them best first (ties by id).

    A candidate is named by its conversation and id together (ids are unique per
    conversation only), and its parent is looked for in its own conversation.
    """
    cands = list(candidates)
    base: dict[tuple[str, str], float] = {}
    for c in cands:
        s = 0.0
        if c.keyword_rank is not None:
            s += params.keyword_weight / (params.rrf_k + c.keyword_rank)
        if c.vector_rank is not None:
            s += params.vector_weight / (params.rrf_k + c.vector_rank)
        if c.window_rank is not None and params.window_weight:
            s += params.window_weight / (params.rrf_k + c.window_rank)
        if temporal and c.mentions_time:
            s *= 1.0 + params.time_boost
        base[(c.conversation_id, c.id)] = s
    neighbours: dict[tuple[str, str], float] = defaultdict(float)
    segments: dict[tuple[str, int], float] = defaultdict(float)
    for c in cands:
        key, parent = (c.conversation_id, c.id), (c.conversation_id, c.parent_id or "")
        if c.parent_id is not None and parent in base:
            # parent <-> child, both ways: the best neighbour counts
            neighbours[key] = max(neighbours[key], base[parent])
            neighbours[parent] = max(neighbours[parent], base[key])
        segments[c.segment] = max(segments[c.segment], base[key])
    for c in cands:
        key = (c.conversation_id, c.id)
        c.score = (
            base[key]
            + params.neighbour_share * neighbours[key]
            + params.segment_share * segments[c.segment]
        )
        if c.session_rank is not None and params.session_weight:
            c.score += params.session_weight / (params.session_k + c.session_rank)
    cands.sort(key=lambda c: (-c.score, c.id, c.conversation_id))
    return cands


def ranks(ids: Sequence[K]) -> dict[K, int]:
    """1-based rank of each id in a best-first list."""
    return {mid: n for n, mid in enumerate(ids, start=1)}
