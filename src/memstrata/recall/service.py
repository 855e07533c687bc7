"""RecallEngine's moving parts for one opened memory: the embedder, the vector index, indexing
at append, the embedding job, and the search operation itself.

Indexing at append runs inside the append's transaction (:meth:`RecallEngine.hook`): the
keyword index row is cheap, so it commits with the message. Embedding is not cheap,
so it never runs there: the hook queues a debounced ``recall.embed`` job per
conversation (in the same transaction, so it cannot be lost), and a read first
embeds a little of what is still waiting, within a time budget
(:mod:`memstrata.recall.catchup`); what is left is found by keywords until the job
or a later read embeds it.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memstrata.conversation import ops as conv_ops
from memstrata.conversation.branches import Branch, branch_of
from memstrata.errors import InvalidInput, NotFound
from memstrata.jobs import ops as jobs_ops
from memstrata.recall import index as idx
from memstrata.recall.fusion import Candidate, FusionParams, fuse, ranks
from memstrata.recall.text import QueryInfo, analyse_query, document_text, mentions_time
from memstrata.storage.plan import Op
from memstrata.storage.records import to_micros
from memstrata.types import Message, Scope
from memstrata.usage import MeteredEmbedder

log = logging.getLogger("memstrata.recall")
_announced: set[str] = set()  # keyword-only reasons already logged by this process

if TYPE_CHECKING:
    from memstrata.api.core import Core
    from memstrata.embeddings.port import Embedder
    from memstrata.jobs.ops import Job
    from memstrata.vectors.port import PlannedIndex, VectorItem

__all__ = [
    "EMBED_JOB",
    "BranchRule",
    "Found",
    "LazyRule",
    "RecallEngine",
    "RecallHit",
    "candidates_op",
    "search_op",
]

EMBED_JOB = "recall.embed"
EMBED_BATCH = 64
#: An append skips queueing the embedding job while the job this process queued for its
#: conversation is due more than this far ahead (so it cannot have started yet).
_QUEUED_MARGIN_US = 200_000
#: Conversations whose queued job a process remembers (then it forgets them all).
_QUEUED_REMEMBERED = 10_000
MAX_K = 200
MAX_RANGE = 20
#: Most messages one search returns with their neighbours (``message_range``): beyond it,
#: the lower hits come without neighbours.
MAX_RESULT = 2000
#: Most of the scope's messages read per query term (newest first).
SEARCH_TERM_CAP = 1000


@dataclass(frozen=True, slots=True)
class RecallHit:
    """One recalled message. ``provenance`` lists the message ids it stands for;
    ``neighbour_of`` is set on a message returned as context around another hit."""

    message: Message
    conversation_id: str
    score: float
    provenance: tuple[str, ...]
    neighbour_of: str | None = None

    def to_dict(self) -> dict[str, Any]:
        return {
            "message": self.message.to_dict(),
            "conversation_id": self.conversation_id,
            "score": self.score,
            "provenance": list(self.provenance),
            "neighbour_of": self.neighbour_of,
        }


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
    scope: Scope, hits: Sequence[Message], n: int, rule: BranchRule | None
) -> Op[tuple[dict[str, list[Message]], dict[str, list[Message]]]]:
    """Up to ``n`` messages before and after each hit on its branch: the rule's branch in
    its conversation, else the newest child at each step. Batched: one query for every
    hit's ancestors, then one per step down (never one per hit)."""
    ids = [m.id for m in hits]
    up = yield from idx.ancestors_within(scope, ids, n)
    before = {m.id: list(reversed(up.get(m.id, []))) for m in hits}
    after: dict[str, list[Message]] = {m.id: [] for m in hits}
    frontier = {m.id: m for m in hits}  # hit id -> the last message reached below it
    for _ in range(n):
        if not frontier:
            break
        children = yield from idx.labelled_children(scope, [m.id for m in frontier.values()])
        nxt: dict[str, Message] = {}
        for origin, cur in frontier.items():
            options = [
                c
                for c, chain in children.get(cur.id, [])
                if rule is None
                or c.conversation_id != rule.branch.conversation_id
                or rule.other_branches
                or rule.branch.contains(chain, c.depth)
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
) -> Op[list[RecallHit]]:
    """Hybrid search in one read transaction (see :mod:`memstrata.recall.fusion`)."""
    rule = yield from branch_rule(scope, conversation_id, leaf_id, include_other_branches)
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
    )
    ranked = fuse(found.candidates, temporal=query.temporal, params=params)[:k]
    messages = found.messages
    if message_range == 0:
        return [RecallHit(messages[c.id], c.conversation_id, c.score, (c.id,)) for c in ranked]
    # The work budget: neighbours for as many of the best hits as keep the answer within
    # MAX_RESULT messages; the rest come alone (documented truncation).
    with_context = max(1, MAX_RESULT // (2 * message_range + 1))
    near = [messages[c.id] for c in ranked[:with_context]]
    before, after = yield from _neighbours(scope, near, message_range, rule)
    hits: list[RecallHit] = []
    seen: set[str] = set()
    for c in ranked:
        m = messages[c.id]
        around = (before.get(m.id, []), [m], after.get(m.id, []))
        for group in around:
            for other in group:
                if other.id in seen or (other is not m and other.id in excluded):
                    continue
                seen.add(other.id)
                of = None if other is m else m.id
                hits.append(RecallHit(other, m.conversation_id, c.score, (other.id,), of))
    return hits


@dataclass(frozen=True, slots=True)
class Found:
    """What the two rankers found: fusion candidates, their messages, and the evidence
    each one has on its own (keyword coverage, cosine similarity)."""

    candidates: list[Candidate]
    messages: dict[str, Message]
    chains: dict[str, str | None]
    coverage: dict[str, float]
    similarity: dict[str, float]


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
) -> Op[Found]:
    """Keyword and vector candidates of ``scope``, filtered by ``excluded`` and ``rule``."""
    keyword = yield from idx.keyword_search(
        dialect,
        scope,
        query.terms,
        n,
        conversation_id=conversation_id,
        cap=cap,
        drop_common=drop_common,
    )
    semantic: list[tuple[str, float]] = []
    if vectors is not None and query_vector is not None:
        vec = yield from vectors.search_op(
            scope, query_vector, n, conversation_id=conversation_id, exclude_message_ids=excluded
        )
        semantic = [(h.message_id, h.score) for h in vec]
    coverage = {h.message_id: h.coverage for h in keyword if h.message_id not in excluded}
    similarity = {mid: score for mid, score in semantic if mid not in excluded}
    labelled = yield from idx.labelled_messages(
        scope, list(dict.fromkeys([*coverage, *similarity]))
    )
    if rule is None and lazy_rule is not None:
        rule = yield from lazy_rule.resolve(labelled.values())
    messages = {
        mid: m for mid, (m, chain) in labelled.items() if rule is None or rule.keeps(m, chain)
    }
    kw_rank = ranks([h.message_id for h in keyword if h.message_id in messages])
    vec_rank = ranks([mid for mid, _ in semantic if mid in messages])
    cands = [
        Candidate(
            id=m.id,
            conversation_id=m.conversation_id,
            parent_id=m.parent_id,
            segment=(m.conversation_id, int(m.occurred_at.timestamp())),
            mentions_time=query.temporal and mentions_time(m.content),
            keyword_rank=kw_rank.get(m.id),
            vector_rank=vec_rank.get(m.id),
        )
        for m in messages.values()
    ]
    return Found(
        cands,
        messages,
        {mid: chain for mid, (_, chain) in labelled.items() if mid in messages},
        {mid: v for mid, v in coverage.items() if mid in messages},
        {mid: v for mid, v in similarity.items() if mid in messages},
    )


class RecallEngine:
    """Per-memory recall state: the embedder (injected or the default, resolved lazily)
    and the vector index of its space (opened on first use)."""

    def __init__(self, core: Core, embedder: Embedder | None = None) -> None:
        self._core = core
        self._embedder = embedder
        self._resolved = embedder is not None
        self._unavailable: str | None = None
        self._index: PlannedIndex | None = None
        self._lock = threading.Lock()
        self.params = FusionParams()
        self.mode = core.settings.recall_embed
        #: The embedder's recent wall-clock seconds per message (None: not measured yet),
        #: which sizes the read path's catch-up steps (see ``recall.catchup``).
        self.seconds_per_doc: float | None = None
        #: When the embedding job this process last queued per conversation is due (µs).
        self._queued: dict[str, int] = {}
        from memstrata.recall.tier import RecallTier  # the tier module imports this one

        #: The recall tier of ``mem.context`` (``k`` = 0 switches it off).
        self.tier = RecallTier(self)

    @property
    def dialect(self) -> str:
        return self._core.engine.dialect

    def opened_index(self, embedder: str | None) -> PlannedIndex | None:
        """The vector index already open for ``embedder``'s space, else None (no I/O:
        the context's recall tier calls this inside its read transaction)."""
        index = self._index
        if embedder is None or index is None or index.space.embedder != embedder:
            return None
        return index

    def use(self, embedder: Embedder | None) -> None:
        """Switch embedders (None: keyword recall only). Vectors of the previous space stay
        until ``flush(reindex=True)`` (``memstrata reindex``) replaces them; searches only
        ever compare vectors of the current space."""
        with self._lock:
            self._embedder = embedder
            self._resolved = True
            self._unavailable = None
            self._index = None

    def note_embed_cost(self, seconds: float, n: int) -> None:
        """Fold one measured embedding call (``n`` messages) into ``seconds_per_doc``."""
        if n < 1:
            return
        cost = seconds / n
        old = self.seconds_per_doc
        self.seconds_per_doc = cost if old is None else 0.7 * old + 0.3 * cost

    # -- wiring ----------------------------------------------------------------------------

    def install(self) -> None:
        core = self._core
        dialect = core.engine.dialect
        if core.settings.recall_index:
            core.rt.on_message.append(self.hook)
        core.rt.cascade.on_conversation_delete(
            lambda ids: idx.delete_for_conversations(dialect, ids)
        )
        core.rt.cascade.on_user_delete(lambda t, u: idx.delete_for_user(dialect, t, u))
        core.rt.cascade.on_messages_delete(lambda _c, ids: idx.delete_for_messages(dialect, ids))
        core.jobs.register(EMBED_JOB, _run_embed_job)
        if core.settings.recall_index:
            core.context.add_provider(self.tier)

    @property
    def embedder(self) -> Embedder | None:
        """The embedder in use, or None (keyword-only recall)."""
        if not self._resolved:
            with self._lock:
                if not self._resolved:
                    self._embedder, self._unavailable = _default_embedder()
                    self._resolved = True
        if self.mode == "off" or self._embedder is None:
            return None
        return MeteredEmbedder(self._embedder, self._core.usage)

    @property
    def keyword_only(self) -> str | None:
        """Why recall runs on keywords alone, or None when it also searches by meaning.

        A missing embedder names the command that installs it; ``MEMSTRATA_EMBEDDER=none``
        and ``MEMSTRATA_RECALL_EMBED=off`` are choices and say so.
        """
        emb = self.embedder
        if emb is not None:
            return None
        if self._unavailable is not None:
            return self._unavailable
        if self.mode == "off":
            return "keyword recall only: MEMSTRATA_RECALL_EMBED=off"
        return "keyword recall only: no embedder configured (MEMSTRATA_EMBEDDER=none)"

    @property
    def embedder_missing(self) -> bool:
        """True when an embedder was asked for but cannot run here (not a choice)."""
        return self.embedder is None and self._unavailable is not None

    def hook(self, scope: Scope, message: Message) -> Op[None]:
        """Index a stored message (inside its transaction) and queue its embedding."""
        owner = scope  # appends are checked against the conversation's exact owner
        added = yield from idx.index_message(self._core.engine.dialect, owner, message)
        if not added or self.mode != "background" or self.embedder is None:
            return
        yield from self.queue_embedding(owner, message.conversation_id)

    def queue_embedding(self, owner: Scope, conversation_id: str | None) -> Op[None]:
        """Queue the debounced ``recall.embed`` job of a conversation (None: of ``owner``'s
        whole scope), unless the job this process queued for it is not due yet."""
        rt = self._core.rt
        now = rt.clock()
        target = conversation_id or f"scope:{owner.tenant}:{owner.user}:{owner.agent_key}"
        due = self._queued.get(target)
        if due is not None and now < due - _QUEUED_MARGIN_US:
            # The queued job cannot have started yet: it will embed this message too, so
            # an append skips the enqueue's statements.
            return
        job = yield from jobs_ops.enqueue(
            job_id=rt.make_id(),
            kind=EMBED_JOB,
            key=f"{EMBED_JOB}:{target}",
            tenant=owner.tenant,
            user=owner.user,
            agent=owner.agent,
            conversation_id=conversation_id,
            payload=None,
            flags=None,
            delay_s=0.5,
            max_wait_s=5.0,
            max_attempts=5,
            now=now,
        )
        if len(self._queued) >= _QUEUED_REMEMBERED:
            self._queued.clear()
        self._queued[target] = to_micros(job.run_after)
        self._core.start_local_worker()

    # -- the vector index ------------------------------------------------------------------

    def vector_index(self) -> PlannedIndex | None:
        emb = self.embedder
        if emb is None:
            return None
        if self._index is None or self._index.space.embedder != emb.identity:
            from memstrata.vectors import Space, open_vector_index

            self._index = open_vector_index(self._core.engine, Space(emb.identity, emb.dim))
        return self._index

    async def avector_index(self) -> PlannedIndex | None:
        emb = self.embedder
        if emb is None:
            return None
        if self._index is None or self._index.space.embedder != emb.identity:
            from memstrata.vectors import Space, aopen_vector_index

            self._index = await aopen_vector_index(self._core.engine, Space(emb.identity, emb.dim))
        return self._index

    # -- embedding ---------------------------------------------------------------------------

    @staticmethod
    def items(
        docs: Sequence[idx.PendingDoc], vectors: Sequence[Sequence[float]]
    ) -> list[VectorItem]:
        from memstrata.vectors import VectorItem

        return [
            VectorItem(d.message.id, d.owner, d.message.conversation_id, d.message.id, v)
            for d, v in zip(docs, vectors, strict=True)
        ]

    @staticmethod
    def texts(docs: Sequence[idx.PendingDoc]) -> list[str]:
        return [document_text(d.message) for d in docs]

    @staticmethod
    def store_op(
        index: PlannedIndex, docs: Sequence[idx.PendingDoc], items: Sequence[VectorItem]
    ) -> Op[int]:
        yield from index.add_op(items)
        yield from idx.mark_embedded([d.message.seq for d in docs], index.space.embedder)
        return len(items)

    @staticmethod
    def analyse(query: str) -> QueryInfo:
        if not isinstance(query, str) or not query.strip():
            raise InvalidInput("query must be a non-empty string", field="query")
        if len(query) > 10_000:
            raise InvalidInput("query is over 10000 characters", field="query")
        return analyse_query(query)


def _default_embedder() -> tuple[Embedder | None, str | None]:
    """The embedder ``MEMSTRATA_EMBEDDER`` names (default: the offline MiniLM), or None
    (keyword recall only) when it is ``none`` or cannot be used here; with None, why not.

    Only builds it (and, for the default, locates its weights); models load on first use.
    A missing embedder is logged once per process: recall then runs on keywords alone.
    """
    from memstrata.embeddings.minilm import MiniLMEmbedder
    from memstrata.embeddings.registry import get_embedder
    from memstrata.errors import MemstrataError

    try:
        emb = get_embedder()
        if isinstance(emb, MiniLMEmbedder):
            emb.identity  # noqa: B018 - locates the model: a missing runner shows here
    except Exception as exc:  # a missing optional dependency: recall still works on keywords
        detail = exc.message if isinstance(exc, MemstrataError) else str(exc)
        reason = f"keyword recall only, no semantic search: {' '.join(detail.split())}"
        if reason not in _announced:
            _announced.add(reason)
            log.warning("%s", reason)
        return None, reason
    return emb, None


def _run_embed_job(job: Job, memory: Any) -> None:
    scope = Scope(job.tenant, job.user or "", job.agent)
    memory.recall.flush(scope, conversation_id=job.conversation_id)
