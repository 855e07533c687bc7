"""The search operation and what it shares with the context's recall tier: argument
checks, the branch rule, neighbours, candidates (sans-IO; see memstrata.storage.plan)."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

from memstrata import conversation as conv_ops
from memstrata.conversation.branches import Branch, branch_of
from memstrata.domain.recall import (
    Explanation,
    RecallHit,
    RecallResults,
)
from memstrata.errors import InvalidInput, NotFound
from memstrata.recall import index as idx
from memstrata.recall import keyed
from memstrata.recall.branchtruth import ActiveBranches
from memstrata.recall.fusion import Candidate, FusionParams, fuse, ranks
from memstrata.recall.keyed import MessageKey, key_of
from memstrata.recall.relevance import RelevanceModel, Signals, background, reported
from memstrata.recall.scoring import second_of
from memstrata.recall.text import QueryInfo, mentions_time
from memstrata.storage.plan import Op
from memstrata.storage.records import to_micros
from memstrata.types import Message, Scope, occurred_micros

if TYPE_CHECKING:
    from memstrata.vectors.port import PlannedIndex

MAX_K = 200
MAX_RANGE = 20
#: Most messages one search returns with their neighbours (``message_range``): beyond it,
#: the lower hits come without neighbours.
MAX_RESULT = 2000
#: Most of the scope's messages read per query term (newest first).
SEARCH_TERM_CAP = 1000


#: ``explain_ids`` verdicts: the message was returned, or why it was not.
RETURNED = "returned"
WHY_NOT = (
    "below_relevance",  # under the search's min_relevance
    "ranked_below_k",  # a candidate, ranked below the k returned
    "other_branch",  # off the branch searched (regenerated or edited away)
    "in_context",  # already in the context being assembled (the recall tier's window)
    "excluded",  # named in exclude_ids
    "created_after_as_of",  # written after the search's as_of
    "other_conversation",  # the search was limited to another conversation
    "not_embedded",  # no vector yet and no keyword match: pending embedding
    "outside_candidate_pool",  # neither ranker put it among its candidates
    "unknown",  # no such message of the caller's (another owner's looks the same)
)
DEFAULT_MODEL = RelevanceModel()


def message_vector_id(conversation_id: str, message_id: str) -> str:
    """The vector id of a message: its conversation and id (ids are per conversation;
    migration 14 gave stored message vectors this form too)."""
    return f"{conversation_id}/{message_id}"


def check_args(k: int, message_range: int, exclude_ids: Iterable[str]) -> frozenset[str]:
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise InvalidInput(f"k must be an integer in 1..{MAX_K}", field="k")
    if (
        isinstance(message_range, bool)
        or not isinstance(message_range, int)
        or not 0 <= message_range <= MAX_RANGE
    ):
        raise InvalidInput(
            f"message_range must be an integer in 0..{MAX_RANGE}", field="message_range"
        )
    if isinstance(exclude_ids, str):
        raise InvalidInput("exclude_ids must be a collection of ids", field="exclude_ids")
    excluded = frozenset(exclude_ids)
    if len(excluded) > 10_000:
        raise InvalidInput("at most 10000 excluded ids", field="exclude_ids")
    return excluded


@dataclass(frozen=True, slots=True)
class BranchRule:
    """Which messages of the conversation being answered a search may return.

    Messages of ``branch.conversation_id`` must lie on ``branch`` (ancestors of its
    leaf), unless ``other_branches``; on the branch, those at depth >= ``from_depth``
    (the context's window) or <= ``covered_depth`` (under the summary in use) are
    already in the context. Other conversations are not affected.
    """

    branch: Branch
    other_branches: bool = False
    from_depth: int | None = None
    covered_depth: int | None = None

    def why_not(self, message: Message, chain_id: str | None) -> str:
        """Why :meth:`keeps` turned ``message`` away (an ``explain_ids`` reason)."""
        if not self.branch.contains(chain_id, message.depth):
            return "other_branch"
        return "in_context"

    def keeps(self, message: Message, chain_id: str | None) -> bool:
        if message.conversation_id != self.branch.conversation_id:
            return True
        if not self.branch.contains(chain_id, message.depth):
            return self.other_branches
        if self.from_depth is not None and message.depth >= self.from_depth:
            return False
        return self.covered_depth is None or message.depth > self.covered_depth


@dataclass(frozen=True, slots=True)
class LazyRule:
    """A :class:`BranchRule` read only once the candidates are known, and only as deep
    as they need: none of the conversation outside the context's ranges, no walk."""

    conversation_id: str
    leaf_id: str
    from_depth: int | None = None
    covered_depth: int | None = None

    @property
    def outside(self) -> keyed.DepthsOut:
        """The depths of the conversation the rule turns away whatever the branch (the
        window and what the summary covers): their rows need not be read at all."""
        return (self.conversation_id, self.from_depth, self.covered_depth)

    def resolve(self, candidates: Iterable[tuple[Message, str | None]]) -> Op[BranchRule | None]:
        depths = [
            m.depth
            for m, _ in candidates
            if m.conversation_id == self.conversation_id
            and (self.from_depth is None or m.depth < self.from_depth)
            and (self.covered_depth is None or m.depth > self.covered_depth)
        ]
        if not depths:  # nothing to judge: the ranges alone decide
            branch = Branch(self.conversation_id, self.leaf_id, {})
        else:
            found = yield from branch_of(self.conversation_id, self.leaf_id, min(depths))
            branch = found or Branch(self.conversation_id, self.leaf_id, {})
        return BranchRule(branch, from_depth=self.from_depth, covered_depth=self.covered_depth)


def branch_rule(
    scope: Scope, conversation_id: str | None, leaf_id: str | None, other_branches: bool
) -> Op[BranchRule | None]:
    """The rule for ``mem.recall.search``'s ``leaf_id`` (checked against the scope)."""
    if conversation_id is not None:
        yield from conv_ops.get_conversation(scope, conversation_id)  # NotFound elsewhere
    if leaf_id is None:
        return None
    if conversation_id is None:
        raise InvalidInput("leaf_id needs conversation_id", field="leaf_id")
    branch = yield from branch_of(conversation_id, leaf_id)
    if branch is None:
        raise NotFound(f"leaf {leaf_id} not found", kind="leaf")
    return BranchRule(branch, other_branches)


def _neighbours(
    scope: Scope,
    hits: Sequence[Message],
    n: int,
    rule: BranchRule | None,
    truth: ActiveBranches | None = None,
) -> Op[tuple[dict[MessageKey, list[Message]], dict[MessageKey, list[Message]]]]:
    """Up to ``n`` messages before and after each hit on its branch: the rule's branch in
    its conversation, the active branch in the others (``truth``), else the newest child
    at each step. Batched: one query for every hit's ancestors, then one per step down
    (never one per hit)."""
    keys = [key_of(m) for m in hits]
    up = yield from keyed.ancestors_within(scope, keys, n)
    before = {k: list(reversed(up.get(k, []))) for k in keys}
    after: dict[MessageKey, list[Message]] = {k: [] for k in keys}
    frontier = {key_of(m): m for m in hits}  # hit -> the last message reached below it
    for _ in range(n):
        if not frontier:
            break
        children = yield from keyed.labelled_children(scope, [key_of(m) for m in frontier.values()])
        if truth is not None:
            yield from truth.load(c for options in children.values() for c, _ in options)
        nxt: dict[MessageKey, Message] = {}
        for origin, cur in frontier.items():
            options = [
                c
                for c, chain in children.get(key_of(cur), [])
                if (
                    rule is None
                    or c.conversation_id != rule.branch.conversation_id
                    or rule.other_branches
                    or rule.branch.contains(chain, c.depth)
                )
                and (truth is None or truth.keeps(c, chain))
            ]
            if options:
                nxt[origin] = options[-1]  # newest (children come in seq order)
                after[origin].append(options[-1])
        frontier = nxt
    return before, after


def search_op(
    dialect: str,
    vectors: PlannedIndex | None,
    scope: Scope,
    query: QueryInfo,
    query_vector: Sequence[float] | None,
    *,
    k: int,
    conversation_id: str | None,
    leaf_id: str | None,
    message_range: int,
    excluded: frozenset[str],
    params: FusionParams,
    candidates: int = 100,
    include_other_branches: bool = False,
    created_by: int | None = None,
    min_relevance: float = 0.0,
    explain: bool = False,
    explain_ids: Sequence[str] = (),
    model: RelevanceModel = DEFAULT_MODEL,
) -> Op[RecallResults]:
    """Hybrid search in one read transaction (see :mod:`memstrata.recall.fusion`).

    ``created_by`` (microseconds): only messages created at or before then count, hits
    and neighbours alike (a search as of that time). Hits under ``min_relevance`` are
    left out; ``explain`` adds each hit's signals; ``explain_ids`` says, per id, whether
    it was returned and why not."""
    rule = yield from branch_rule(scope, conversation_id, leaf_id, include_other_branches)
    # Every other conversation (and this one without a leaf) by its active branch.
    truth = None
    if not include_other_branches:
        truth = ActiveBranches(skip=None if rule is None else rule.branch.conversation_id)
    found = yield from candidates_op(
        dialect,
        vectors,
        scope,
        query,
        query_vector,
        n=min(max(candidates, 5 * k) + len(excluded), 1000),
        conversation_id=conversation_id,
        excluded=excluded,
        rule=rule,
        cap=SEARCH_TERM_CAP,
        created_by=created_by,
        truth=truth,
        fusion=params,
    )
    judged = judge(found, model, fuse(found.candidates, temporal=query.temporal, params=params))
    kept = [j for j in judged if j.relevance >= min_relevance]
    ranked = kept[:k]
    messages = found.messages
    signals = (lambda j: j.signals()) if explain else (lambda j: None)
    if message_range == 0:
        hits = [
            RecallHit(
                messages[j.key], j.key[0], j.score, (j.key[1],), None, j.relevance, signals(j)
            )
            for j in ranked
        ]
    else:
        hits = yield from _with_neighbours(
            scope, found, ranked, message_range, rule, created_by, excluded, signals, truth
        )
    explained: list[Explanation] = []
    if explain_ids:
        explained = yield from _explain(
            scope,
            explain_ids,
            found,
            judged,
            {h.message.id for h in hits if h.neighbour_of is None},
            min_relevance,
            excluded,
            conversation_id,
            vectors is not None and query_vector is not None,
        )
    return RecallResults(hits, explained=explained)


def _with_neighbours(
    scope: Scope,
    found: Found,
    ranked: Sequence[Judged],
    message_range: int,
    rule: BranchRule | None,
    created_by: int | None,
    excluded: frozenset[str],
    signals: Any,
    truth: ActiveBranches | None = None,
) -> Op[list[RecallHit]]:
    # The work budget: neighbours for as many of the best hits as keep the answer within
    # MAX_RESULT messages; the rest come alone (documented truncation).
    messages = found.messages
    with_context = max(1, MAX_RESULT // (2 * message_range + 1))
    near = [messages[j.key] for j in ranked[:with_context]]
    before, after = yield from _neighbours(scope, near, message_range, rule, truth)
    if created_by is not None:  # neighbours written since then were not there
        before = {k: [m for m in v if _created_by(m, created_by)] for k, v in before.items()}
        after = {k: [m for m in v if _created_by(m, created_by)] for k, v in after.items()}
    hits: list[RecallHit] = []
    seen: set[MessageKey] = set()
    for j in ranked:
        m = messages[j.key]
        around = (before.get(key_of(m), []), [m], after.get(key_of(m), []))
        for group in around:
            for other in group:
                if key_of(other) in seen or (other is not m and other.id in excluded):
                    continue
                seen.add(key_of(other))
                of = None if other is m else m.id
                hits.append(
                    RecallHit(
                        other,
                        m.conversation_id,
                        j.score,
                        (other.id,),
                        of,
                        j.relevance,
                        signals(j) if other is m else None,
                    )
                )
    return hits


@dataclass(frozen=True, slots=True)
class Judged:
    """One fused candidate with its relevance (:mod:`memstrata.recall.relevance`)."""

    key: MessageKey
    score: float
    relevance: float
    judged: Signals
    keyword_rank: int | None
    vector_rank: int | None
    window_rank: int | None = None

    def signals(self) -> dict[str, Any]:
        s = self.judged
        return {
            "fused_score": round(self.score, 6),
            "keyword_rank": self.keyword_rank,
            "keyword_coverage": round(s.coverage, 4),
            "vector_rank": self.vector_rank,
            "window_rank": self.window_rank,
            "cosine": None if s.cosine is None else round(s.cosine, 4),
            "background": round(s.background, 4),
            "standout": None if s.standout is None else round(s.standout, 4),
            "relevance": reported(self.relevance),
        }


def judge(found: Found, model: RelevanceModel, ranked: Sequence[Candidate]) -> list[Judged]:
    """The fused candidates, best first, each with its calibrated relevance."""
    bg = background(list(found.similarity.values()))
    out: list[Judged] = []
    for c in ranked:
        key = (c.conversation_id, c.id)
        sig = Signals(found.coverage.get(key, 0.0), found.similarity.get(key), bg)
        out.append(
            Judged(
                key,
                c.score,
                reported(model(sig)),
                sig,
                c.keyword_rank,
                c.vector_rank,
                c.window_rank,
            )
        )
    return out


def _explain(
    scope: Scope,
    ids: Sequence[str],
    found: Found,
    judged: Sequence[Judged],
    returned: set[str],
    min_relevance: float,
    excluded: frozenset[str],
    conversation_id: str | None,
    semantic: bool,
) -> Op[list[Explanation]]:
    """Per id: returned, or the first reason it was not (see :data:`WHY_NOT`)."""
    by_id: dict[str, list[Judged]] = {}
    for j in judged:
        by_id.setdefault(j.key[1], []).append(j)
    dropped: dict[str, list[tuple[MessageKey, str]]] = {}
    for key, why in found.dropped.items():
        dropped.setdefault(key[1], []).append((key, why))
    unseen = [i for i in ids if i not in by_id and i not in dropped and i not in excluded]
    docs = (yield from idx.docs_by_message_id(scope, unseen)) if unseen else {}
    out: list[Explanation] = []
    for mid in ids:
        if mid in by_id:
            for j in by_id[mid]:
                if mid in returned:
                    reason = RETURNED
                elif j.relevance < min_relevance:
                    reason = "below_relevance"
                else:
                    reason = "ranked_below_k"
                out.append(Explanation(mid, j.key[0], reason, j.relevance))
        elif mid in dropped:
            out += [Explanation(mid, key[0], why) for key, why in dropped[mid]]
        elif mid in excluded:
            out.append(Explanation(mid, None, "excluded"))
        elif mid in docs:
            for conv, embedded in docs[mid]:
                if conversation_id is not None and conv != conversation_id:
                    reason = "other_conversation"
                elif semantic and not embedded:
                    reason = "not_embedded"
                else:
                    reason = "outside_candidate_pool"
                out.append(Explanation(mid, conv, reason))
        else:
            out.append(Explanation(mid, None, "unknown"))
    return out


def _created_by(message: Message, at: int) -> bool:
    return to_micros(message.created_at) <= at


@dataclass(frozen=True, slots=True)
class Found:
    """What the two rankers found: fusion candidates, their messages, and the evidence
    each one has on its own (keyword coverage, cosine similarity), by message key."""

    candidates: list[Candidate]
    messages: dict[MessageKey, Message]
    chains: dict[MessageKey, str | None]
    coverage: dict[MessageKey, float]
    similarity: dict[MessageKey, float]
    #: Candidates a filter turned away, and why (``explain_ids`` reasons).
    dropped: dict[MessageKey, str] = field(default_factory=dict)


def candidates_op(
    dialect: str,
    vectors: PlannedIndex | None,
    scope: Scope,
    query: QueryInfo,
    query_vector: Sequence[float] | None,
    *,
    n: int,
    conversation_id: str | None,
    excluded: frozenset[str],
    rule: BranchRule | None,
    cap: int,
    drop_common: bool = False,
    lazy_rule: LazyRule | None = None,
    created_by: int | None = None,
    truth: ActiveBranches | None = None,
    fusion: FusionParams,
) -> Op[Found]:
    """Keyword and vector candidates of ``scope``, filtered by ``excluded`` and ``rule``
    (and, with ``created_by``, to the messages created at or before that time; with
    ``truth``, to those on their conversation's active branch), ranked for ``fusion``:
    the session and window rankings only where it weighs them (the window ranking ranks
    candidates; it brings none)."""
    keyword = yield from idx.keyword_search(
        dialect,
        scope,
        query.terms,
        n,
        conversation_id=conversation_id,
        cap=cap,
        drop_common=drop_common,
        windows=fusion.window_weight > 0,
        sessions=fusion.session_weight > 0,
    )
    semantic: list[tuple[MessageKey, float]] = []
    if vectors is not None and query_vector is not None:
        vec = yield from vectors.search_op(
            scope, query_vector, n, conversation_id=conversation_id, exclude_message_ids=excluded
        )
        semantic = [((h.conversation_id, h.message_id), h.score) for h in vec]
    coverage = {
        (h.conversation_id, h.message_id): h.coverage
        for h in keyword
        if h.message_id not in excluded
    }
    similarity = {key: score for key, score in semantic if key[1] not in excluded}
    labelled = yield from keyed.labelled_messages(
        scope,
        list(dict.fromkeys([*coverage, *similarity])),
        outside=None if lazy_rule is None else lazy_rule.outside,
    )
    if rule is None and lazy_rule is not None:
        rule = yield from lazy_rule.resolve(labelled.values())
    if truth is not None:
        yield from truth.load(m for m, _ in labelled.values())
    messages: dict[MessageKey, Message] = {}
    dropped: dict[MessageKey, str] = {}
    for key, (m, chain) in labelled.items():
        if rule is not None and not rule.keeps(m, chain):
            dropped[key] = rule.why_not(m, chain)
        elif truth is not None and not truth.keeps(m, chain):
            dropped[key] = "other_branch"
        elif created_by is not None and not _created_by(m, created_by):
            dropped[key] = "created_after_as_of"
        else:
            messages[key] = m
    kw_keys = [(h.conversation_id, h.message_id) for h in keyword]
    kw_rank = ranks([key for key in kw_keys if key in messages])
    vec_rank = ranks([key for key, _ in semantic if key in messages])
    win_rank: dict[MessageKey, int] = {}
    if keyword.windows is not None:
        win_rank = keyword.windows.ranks(
            (key, m.seq, m.conversation_id) for key, m in messages.items()
        )
    cands = [
        Candidate(
            id=m.id,
            conversation_id=m.conversation_id,
            parent_id=m.parent_id,
            segment=segment,
            mentions_time=query.temporal and mentions_time(m.content),
            keyword_rank=kw_rank.get(key),
            vector_rank=vec_rank.get(key),
            session_rank=keyword.sessions.get(segment),
            window_rank=win_rank.get(key),
        )
        for key, m in messages.items()
        for segment in [(m.conversation_id, second_of(occurred_micros(m)))]
    ]
    return Found(
        cands,
        messages,
        {key: chain for key, (_, chain) in labelled.items() if key in messages},
        {key: v for key, v in coverage.items() if key in messages},
        {key: v for key, v in similarity.items() if key in messages},
        dropped,
    )
