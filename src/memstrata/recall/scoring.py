"""Keyword scores from the caller's own documents only (pure, no I/O).

The full-text indexes only say which of the scope's messages hold a term; the
score is computed here, BM25-style, from statistics of that scope alone: a term's
document frequency is counted among the scope's messages (up to a cap), the corpus
size and the average length are fixed constants, and a message's length is its
stored token count. Nothing another tenant or user writes can move a score, an
order or a dropped term (a store-wide statistic would: a tenant could plant a word
and watch its own ranking to learn whether anyone else ever wrote it).

Chat messages rarely repeat a word, so each matched term counts once.
"""

from __future__ import annotations

import math
from collections.abc import Hashable, Iterable, Mapping, Sequence
from dataclasses import dataclass
from typing import NamedTuple, TypeVar

__all__ = [
    "DocMatch",
    "ScoredDoc",
    "TermWindows",
    "idf",
    "score_docs",
    "second_of",
    "session_ranks",
]

K = TypeVar("K", bound=Hashable)

#: The notional corpus size a score's idf is computed against (a constant, never a shared
#: count; above every per-term read cap, so idf stays positive and ordered). Chosen with
#: ``memstrata bench locomo``: keyword TurnRecall@10 0.676 against 0.666 with 10,000.
CORPUS = 2_000
#: The corpus size of the coverage's idf (the relevance gate's keyword evidence, whose
#: floors were calibrated with it; see :mod:`memstrata.recall.gate`).
COVERAGE_CORPUS = 10_000
#: The notional average message length in tokens (BM25's length normalisation).
AVG_LEN = 40.0
K1 = 1.2
B = 0.75


def idf(df: int, corpus: int = CORPUS) -> float:
    """BM25's idf of a term held by ``df`` of the scope's messages (always > 0)."""
    return math.log(1.0 + (corpus - df + 0.5) / (df + 0.5)) if df < corpus else math.log(1.5)


class DocMatch(NamedTuple):
    """One message that holds a term (a tuple: a posting list holds hundreds of them)."""

    seq: int
    message_id: str
    conversation_id: str
    tokens: int
    #: When it was said, in whole seconds (:func:`second_of`): messages of one
    #: conversation said at the same second form one session (a fusion segment).
    second: int = 0


def second_of(occurred_at_micros: int) -> int:
    """The whole second of a moment in microseconds (a session's key with its conversation)."""
    return occurred_at_micros // 1_000_000


#: A session is ranked only when at least this many of its messages hold a query term.
SESSION_MIN_MESSAGES = 2


def session_ranks(postings: Mapping[str, Sequence[DocMatch]]) -> dict[tuple[str, int], int]:
    """Rank the sessions the query's terms fall in (1 = best): a session scores each term
    it holds anywhere, by idf, counted with saturation (two of its messages holding a
    term weigh more than one, ten not much more than two). Evidence is often spread over
    a session's turns (a question in one, its answer in the next), which the message
    scores alone do not see. A session of one matching message is left to them."""
    score: dict[tuple[str, int], float] = {}
    members: dict[tuple[str, int], set[int]] = {}
    for docs in postings.values():
        w = idf(len(docs))
        held: dict[tuple[str, int], int] = {}
        for d in docs:
            key = (d.conversation_id, d.second)
            if key in held:
                held[key] += 1
                members[key].add(d.seq)
            else:
                held[key] = 1
                if key in members:
                    members[key].add(d.seq)
                else:
                    members[key] = {d.seq}
        for key, n in held.items():
            score[key] = score.get(key, 0.0) + w * 2.0 * n / (n + 1.0)
    kept = [k for k in score if len(members[k]) >= SESSION_MIN_MESSAGES]
    kept.sort(key=lambda k: (-score[k], k))
    return {k: n for n, k in enumerate(kept, start=1)}


#: How far a message's window reaches on each side, in ``seq`` (write order): the two
#: messages written before it and the two after, when they are of its conversation.
WINDOW_SPAN = 2


class TermWindows:
    """Which query terms each message holds (from the postings already read), to score a
    message by the terms its *window* holds: the message and those written up to
    ``span`` before and after it in the same conversation (by ``seq``), each term counted
    once, by its idf. A question's words are often split over a few turns (what was
    asked, what was answered, the name said a line earlier), which a message's own score
    does not see; a message that holds none of them itself (the answer "He is a beagle"
    to "What breed is Rex?") still gets its window's. Messages of other conversations
    written in between only narrow a window (their seqs are skipped, never joined)."""

    __slots__ = ("_held", "_weights", "_worth", "span")

    def __init__(self, postings: Mapping[str, Sequence[DocMatch]], span: int = WINDOW_SPAN) -> None:
        self.span = span
        self._weights = [idf(len(docs)) for docs in postings.values()]
        held: dict[int, tuple[str, int]] = {}  # seq -> (conversation, bit mask of terms)
        for i, docs in enumerate(postings.values()):
            bit = 1 << i
            for d in docs:
                was = held.get(d.seq)
                held[d.seq] = (d.conversation_id, bit if was is None else was[1] | bit)
        self._held = held
        self._worth: dict[int, float] = {}  # mask -> summed idf (in the terms' order)

    def score(self, seq: int, conversation_id: str) -> float:
        """The idf mass of the query terms held in the window around ``seq``."""
        mask = 0
        held = self._held
        for other in range(seq - self.span, seq + self.span + 1):
            near = held.get(other)
            if near is not None and near[0] == conversation_id:
                mask |= near[1]
        if not mask:
            return 0.0
        value = self._worth.get(mask)
        if value is None:
            value = sum(w for i, w in enumerate(self._weights) if mask >> i & 1)
            self._worth[mask] = value
        return value

    def ranks(self, members: Iterable[tuple[K, int, str]]) -> dict[K, int]:
        """Rank ``members`` (key, seq, conversation) by their window's score, 1 = best
        (ties: the newer first); those whose window holds no term are not ranked."""
        scored = [(self.score(seq, conv), seq, key) for key, seq, conv in members]
        scored = [s for s in scored if s[0] > 0.0]
        scored.sort(key=lambda s: (-s[0], -s[1]))
        return {key: n for n, (_, _, key) in enumerate(scored, start=1)}


@dataclass(frozen=True, slots=True)
class ScoredDoc:
    message_id: str
    conversation_id: str
    score: float
    #: Share of the query's idf mass this message matches (0..1): keyword evidence
    #: on a scale that does not depend on the query's length.
    coverage: float
    seq: int


def score_docs(
    postings: Mapping[str, Sequence[DocMatch]], dropped_mass: float = 0.0, limit: int | None = None
) -> list[ScoredDoc]:
    """Score every message in ``postings`` (term -> the scope's messages holding it),
    best first (ties: newest first), the best ``limit`` of them (None: all).
    ``dropped_mass`` is the idf of query terms too common to read: they still count in the
    query's mass, so coverage stays honest."""
    weights = {t: idf(len(docs)) for t, docs in postings.items()}
    mass = {t: idf(len(docs), COVERAGE_CORPUS) for t, docs in postings.items()}
    total = sum(mass.values()) + dropped_mass
    acc: dict[int, list[float]] = {}
    meta: dict[int, DocMatch] = {}
    norms: dict[int, float] = {}  # by token count: the same length normalises alike
    for term, docs in postings.items():
        w, m = weights[term], mass[term]
        for d in docs:
            norm = norms.get(d.tokens)
            if norm is None:
                norm = norms[d.tokens] = (K1 + 1.0) / (
                    1.0 + K1 * (1.0 - B + B * max(d.tokens, 1) / AVG_LEN)
                )
            entry = acc.get(d.seq)
            if entry is None:
                acc[d.seq] = [w * norm, m]
                meta[d.seq] = d
            else:
                entry[0] += w * norm
                entry[1] += m
    # Rank first (score, then the newer seq), build only what is returned.
    ranked = sorted(acc.items(), key=lambda kv: (-kv[1][0], -kv[0]))
    if limit is not None:
        ranked = ranked[:limit]
    return [
        ScoredDoc(
            meta[seq].message_id,
            meta[seq].conversation_id,
            s,
            (m / total) if total > 0 else 0.0,
            seq,
        )
        for seq, (s, m) in ranked
    ]
