"""RecallEngine's moving parts for one opened memory: the embedder, the vector index, indexing
at append, the embedding job, and the search operation itself.

Indexing at append runs inside the append's transaction (:meth:`RecallEngine.hook`): the
keyword index row is cheap, so it commits with the message. Embedding is not cheap,
so it never runs there: the hook queues a debounced ``recall.embed`` job per
conversation (in the same transaction, so it cannot be lost), and a search first
embeds whatever of its scope is still waiting (bounded), so recall sees every
message at once whether or not a worker runs.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING, Any

from memstrata.conversation import ops as conv_ops
from memstrata.errors import InvalidInput
from memstrata.jobs import ops as jobs_ops
from memstrata.recall import index as idx
from memstrata.recall.fusion import Candidate, FusionParams, fuse, ranks
from memstrata.recall.text import QueryInfo, analyse_query, document_text, mentions_time
from memstrata.storage.plan import Op
from memstrata.types import Message, Scope
from memstrata.usage import MeteredEmbedder

log = logging.getLogger("memstrata.recall")
_announced: set[str] = set()  # keyword-only reasons already logged by this process

if TYPE_CHECKING:
    from memstrata.api.core import Core
    from memstrata.embeddings.port import Embedder
    from memstrata.jobs.ops import Job
    from memstrata.vectors.port import PlannedIndex, VectorItem

__all__ = ["EMBED_JOB", "RecallEngine", "RecallHit", "search_op"]

EMBED_JOB = "recall.embed"
#: Most messages a search embeds before it runs (the rest wait for the job).
CATCH_UP_LIMIT = 512
EMBED_BATCH = 64
MAX_K = 200
MAX_RANGE = 20


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


def _neighbours(
    scope: Scope, hit: Message, n: int, branch: dict[str, Message] | None
) -> Op[tuple[list[Message], list[Message]]]:
    """Up to ``n`` messages before and after ``hit`` on its branch (the given branch,
    else the newest child at each step)."""
    before: list[Message] = []
    cur = hit
    while len(before) < n and cur.parent_id is not None:
        parent = branch.get(cur.parent_id) if branch is not None else None
        if parent is None:
            found = yield from idx.messages_by_id(scope, [cur.parent_id])
            parent = found.get(cur.parent_id)
        if parent is None:
            break
        before.append(parent)
        cur = parent
    after: list[Message] = []
    cur = hit
    while len(after) < n:
        children = yield from idx.children_of(cur.conversation_id, [cur.id])
        if branch is not None:
            children = [c for c in children if c.id in branch]
        if not children:
            break
        cur = children[-1]
        after.append(cur)
    return list(reversed(before)), after


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
) -> Op[list[RecallHit]]:
    """Hybrid search in one read transaction (see :mod:`memstrata.recall.fusion`)."""
    branch: dict[str, Message] | None = None
    if leaf_id is not None:
        if conversation_id is None:
            raise InvalidInput("leaf_id needs conversation_id", field="leaf_id")
        path = yield from conv_ops.path(scope, conversation_id, leaf_id)
        branch = {m.id: m for m in path}
    elif conversation_id is not None:
        yield from conv_ops.get_conversation(scope, conversation_id)  # NotFound elsewhere
    # Filtered-out ids must not eat the candidate budget.
    n = min(max(candidates, 5 * k) + len(excluded), 1000)
    keyword = yield from idx.keyword_search(
        dialect, scope, query.terms, n, conversation_id=conversation_id
    )
    semantic: list[str] = []
    if vectors is not None and query_vector is not None:
        found = yield from vectors.search_op(
            scope, query_vector, n, conversation_id=conversation_id, exclude_message_ids=excluded
        )
        semantic = [h.message_id for h in found]
    keep = [h.message_id for h in keyword if h.message_id not in excluded]
    if branch is not None:
        keep = [m for m in keep if m in branch]
        semantic = [m for m in semantic if m in branch]
    kw_rank, vec_rank = ranks(keep), ranks(semantic)
    messages = yield from idx.messages_by_id(scope, list(dict.fromkeys(keep + semantic)))
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
    ranked = fuse(cands, temporal=query.temporal, params=params)[:k]
    hits: list[RecallHit] = []
    seen: set[str] = set()
    for c in ranked:
        m = messages[c.id]
        if message_range == 0:
            hits.append(RecallHit(m, m.conversation_id, c.score, (m.id,)))
            continue
        before, after = yield from _neighbours(scope, m, message_range, branch)
        for other in before:
            if other.id not in seen and other.id not in excluded:
                seen.add(other.id)
                hits.append(RecallHit(other, m.conversation_id, c.score, (other.id,), m.id))
        if m.id not in seen:
            seen.add(m.id)
            hits.append(RecallHit(m, m.conversation_id, c.score, (m.id,)))
        for other in after:
            if other.id not in seen and other.id not in excluded:
                seen.add(other.id)
                hits.append(RecallHit(other, m.conversation_id, c.score, (other.id,), m.id))
    return hits


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
        rt = self._core.rt
        yield from jobs_ops.enqueue(
            job_id=rt.make_id(),
            kind=EMBED_JOB,
            key=f"{EMBED_JOB}:{message.conversation_id}",
            tenant=owner.tenant,
            user=owner.user,
            agent=owner.agent,
            conversation_id=message.conversation_id,
            payload=None,
            flags=None,
            delay_s=0.5,
            max_wait_s=5.0,
            max_attempts=5,
            now=rt.clock(),
        )
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
