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
from collections import Counter
from collections.abc import Collection, Hashable, Iterable, Mapping, Sequence
from typing import NamedTuple, TypeVar

__all__ = [
    "DocMatch",
    "Matches",
    "ScoredDoc",
    "TermWindows",
    "bits",
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
    """One message that holds a query term (a tuple: a search reads hundreds of them)."""

    seq: int
    message_id: str
    conversation_id: str
    tokens: int
    #: When it was said, in whole seconds (:func:`second_of`): messages of one
    #: conversation said at the same second form one session (a fusion segment).
    second: int = 0
    #: Which of the query's terms it holds: bit ``i`` for the ``i``-th term.
    terms: int = 0


class Matches:
    """The scope's messages holding any of a query's terms, each once with the terms it
    holds (:attr:`DocMatch.terms`), and each term's document frequency among them
    (``df[i]``; None for a term left unread, too common to tell anything)."""

    __slots__ = ("df", "docs")

    def __init__(self, docs: Sequence[DocMatch], df: Sequence[int | None]) -> None:
        self.docs = docs
        self.df = df

    @classmethod
    def of(
        cls, postings: Mapping[str, Sequence[DocMatch]], unread: Collection[str] = ()
    ) -> Matches:
        """From posting lists (term -> the messages holding it; bits in the terms' order);
        the ``unread`` terms among them hold no message and have no frequency."""
        tagged = [
            d._replace(terms=1 << i) for i, docs in enumerate(postings.values()) for d in docs
        ]
        skipped = [i for i, t in enumerate(postings) if t in unread]
        return cls.counted(tagged, len(postings), skipped, merge=True)

    @classmethod
    def counted(
        cls,
        docs: list[DocMatch],
        n_terms: int,
        unread: Collection[int] = (),
        *,
        merge: bool = False,
    ) -> Matches:
        """From messages with their terms' masks (with ``merge``, a message may come more
        than once: its masks are joined), each term's frequency counted from the masks;
        ``unread`` terms (by index) have none."""
        if merge:
            merged: dict[int, DocMatch] = {}
            for d in docs:
                was = merged.get(d.seq)
                merged[d.seq] = d if was is None else was._replace(terms=was.terms | d.terms)
            docs = list(merged.values())
        held = [0] * n_terms
        for mask, n in Counter(d.terms for d in docs).items():
            for i in bits(mask):
                held[i] += n
        return cls(docs, [None if i in unread else n for i, n in enumerate(held)])

    def postings(self) -> list[list[DocMatch]]:
        """The messages holding each term (in the terms' order; none for an unread one)."""
        out: list[list[DocMatch]] = [[] for _ in self.df]
        for d in self.docs:
            for i in bits(d.terms):
                out[i].append(d)
        return out


def bits(mask: int) -> list[int]:
    """The indices of the bits set in ``mask``, lowest first."""
    out = []
    i = 0
    while mask:
        if mask & 1:
            out.append(i)
        mask >>= 1
        i += 1
    return out


def second_of(occurred_at_micros: int) -> int:
    """The whole second of a moment in microseconds (a session's key with its conversation)."""
    return occurred_at_micros // 1_000_000


#: A session is ranked only when at least this many of its messages hold a query term.
SESSION_MIN_MESSAGES = 2


def session_ranks(matches: Matches) -> dict[tuple[str, int], int]:
    """Rank the sessions the query's terms fall in (1 = best): a session scores each term
    it holds anywhere, by idf, counted with saturation (two of its messages holding a
    term weigh more than one, ten not much more than two). Evidence is often spread over
    a session's turns (a question in one, its answer in the next), which the message
    scores alone do not see. A session of one matching message is left to them."""
    score: dict[tuple[str, int], float] = {}
    members: dict[tuple[str, int], set[int]] = {}
    for docs in matches.postings():
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

    def __init__(self, matches: Matches, span: int = WINDOW_SPAN) -> None:
        self.span = span
        # An unread term is in no message's mask: its weight is never summed.
        self._weights = [0.0 if df is None else idf(df) for df in matches.df]
        # seq -> (conversation, bit mask of terms)
        self._held = {d.seq: (d.conversation_id, d.terms) for d in matches.docs}
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


class ScoredDoc(NamedTuple):
    """One scored message (a tuple: a search makes a few hundred, and a frozen
    dataclass's field-by-field ``__init__`` cost five times as much)."""

    message_id: str
    conversation_id: str
    score: float
    #: Share of the query's idf mass this message matches (0..1): keyword evidence
    #: on a scale that does not depend on the query's length.
    coverage: float
    seq: int


def score_docs(
    matches: Matches, dropped_mass: float = 0.0, limit: int | None = None
) -> list[ScoredDoc]:
    """Score every message of ``matches``, best first (ties: newest first), the best
    ``limit`` of them (None: all). ``dropped_mass`` is the idf of query terms too common
    to read: they still count in the query's mass, so coverage stays honest."""
    weights = [0.0 if df is None else idf(df) for df in matches.df]
    mass = [0.0 if df is None else idf(df, COVERAGE_CORPUS) for df in matches.df]
    total = sum(m for m, df in zip(mass, matches.df, strict=True) if df is not None)
    total += dropped_mass
    # Per set of terms held: their weights (summed term by term, in the terms' order, as
    # each message's score always was) and their coverage mass.
    held: dict[int, tuple[list[float], float]] = {}
    norms: dict[int, float] = {}  # by token count: the same length normalises alike
    ranked: list[tuple[float, int, float, DocMatch]] = []
    for d in matches.docs:
        wm = held.get(d.terms)
        if wm is None:
            which = bits(d.terms)
            m = 0.0
            for i in which:
                m += mass[i]
            wm = held[d.terms] = ([weights[i] for i in which], m)
        norm = norms.get(d.tokens)
        if norm is None:
            norm = norms[d.tokens] = (K1 + 1.0) / (
                1.0 + K1 * (1.0 - B + B * max(d.tokens, 1) / AVG_LEN)
            )
        s = 0.0
        for w in wm[0]:
            s += w * norm
        ranked.append((-s, -d.seq, wm[1], d))
    ranked.sort()  # score, then the newer seq: never a tie past them (seqs are unique)
    if limit is not None:
        ranked = ranked[:limit]
    return [
        ScoredDoc(d.message_id, d.conversation_id, -s, (m / total) if total > 0 else 0.0, d.seq)
        for s, _, m, d in ranked
    ]
