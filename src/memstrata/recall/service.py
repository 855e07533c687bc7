"""RecallEngine's moving parts for one opened memory: the embedder, the vector index, indexing
at append, the embedding job, and the search operation itself.

Indexing at append runs inside the append's transaction (:meth:`RecallEngine.hook`): the
keyword index row is cheap, so it commits with the message (on SQLite the full-text rows
follow in batches, see :mod:`memstrata.recall.keywords`). Embedding is not cheap,
so it never runs there: a read first embeds the caller's messages still waiting, up to
a bound by count (:mod:`memstrata.recall.catchup`), and with
``MEMSTRATA_RECALL_EMBED=background`` the hook also queues a debounced ``recall.embed``
job per conversation (in the same transaction, so it cannot be lost); what a read
leaves waiting is found by keywords and reported as ``pending`` until it is embedded.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Sequence
from typing import TYPE_CHECKING

from memstrata.domain.recall import RecallHit
from memstrata.errors import InvalidInput
from memstrata.jobs import ops as jobs_ops
from memstrata.recall import index as idx
from memstrata.recall import keywords
from memstrata.recall.fusion import FusionParams
from memstrata.recall.search import (
    MAX_K,
    MAX_RANGE,
    MAX_RESULT,
    BranchRule,
    Found,
    LazyRule,
    candidates_op,
    message_vector_id,
    search_op,
)
from memstrata.recall.text import INDEXED_ROLES, QueryInfo, analyse_query, document_text
from memstrata.recall.tier import RecallTier
from memstrata.storage.plan import Op
from memstrata.storage.records import to_micros
from memstrata.types import Message, Scope, Status
from memstrata.usage import MeteredEmbedder

EMBED_JOB = "recall.embed"
EMBED_BATCH = 64
#: Messages one step of ``mem.recall.flush`` (and so the embedding job) reads and embeds.
#: The embedder sorts what it is given by length before cutting batches of 8, so a wider
#: window pads less: on LoCoMo turns 3% padded tokens at 256 against 11% at 64, and
#: 12% less CPU per message measured (see docs/benchmarks.md, the issue-18 targets).
FLUSH_BATCH = 256
#: An append skips queueing the embedding job while the job this process queued for its
#: conversation is due more than this far ahead (so it cannot have started yet).
_QUEUED_MARGIN_US = 200_000
#: Conversations whose queued job a process remembers (then it forgets them all).
_QUEUED_REMEMBERED = 10_000

log = logging.getLogger("memstrata.recall")
_announced: set[str] = set()  # keyword-only reasons already logged by this process

if TYPE_CHECKING:
    from memstrata.api.core import Core, JobContext
    from memstrata.context.kit import ContextKit
    from memstrata.embeddings.port import Embedder
    from memstrata.jobs.worker import Handler
    from memstrata.vectors.port import PlannedIndex, VectorItem

__all__ = [
    "EMBED_BATCH",
    "EMBED_JOB",
    "FLUSH_BATCH",
    "MAX_K",
    "MAX_RANGE",
    "MAX_RESULT",
    "BranchRule",
    "Found",
    "LazyRule",
    "RecallEngine",
    "RecallHit",
    "candidates_op",
    "search_op",
]


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
        #: When the embedding job this process last queued per conversation is due (µs).
        self._queued: dict[str, int] = {}
        #: When this process last appended to each conversation (µs; the inline mode's
        #: burst test, ``MEMSTRATA_RECALL_EMBED_INLINE_BURST_MS``).
        self._appended: dict[str, int] = {}

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

    def install(self, context: ContextKit, embed: Handler[JobContext]) -> None:
        """Index at append, forget with the cascade, run ``embed`` (the facade's flush)
        for the embedding jobs, and serve the recall tier of ``context``."""
        core = self._core
        dialect = core.engine.dialect
        if core.settings.recall_index:
            core.rt.on_message.append(self.hook)
        first = dialect == "sqlite" and core.settings.recall_index  # what waits, written
        core.rt.cascade.on_conversation_delete(
            lambda ids: keywords.deleting(first, idx.delete_for_conversations(dialect, ids))
        )
        core.rt.cascade.on_user_delete(
            lambda t, u: keywords.deleting(first, idx.delete_for_user(dialect, t, u))
        )
        core.rt.cascade.on_user_delete(self._forget_user)
        core.rt.cascade.on_messages_delete(
            lambda c, ids: keywords.deleting(first, idx.delete_for_messages(dialect, c, ids))
        )
        core.jobs.register(EMBED_JOB, embed)
        if core.settings.recall_index:
            context.add_provider(self.tier)

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
        added = yield from keywords.index_at_append(self._core.engine.dialect, owner, message)
        if not added or self.mode != "background" or self.embedder is None:
            return
        yield from self.queue_embedding(owner, message.conversation_id)

    def embeds_inline(self, message: Message) -> bool | None:
        """With ``MEMSTRATA_RECALL_EMBED=inline``, whether the append that stored
        ``message`` embeds it itself (True), or leaves it to the background job (False:
        a burst or a long message); None in the other modes, or when there is nothing
        to embed. Notes the append for the next call's burst test."""
        if self.mode != "inline" or not self._core.settings.recall_index:
            return None
        now = self._core.rt.clock()
        last = self._appended.get(message.conversation_id)
        if len(self._appended) >= _QUEUED_REMEMBERED:
            self._appended.clear()
        self._appended[message.conversation_id] = now
        if message.role not in INDEXED_ROLES or message.status is not Status.COMPLETE:
            return None
        text = document_text(message)
        if not text.strip() or self.embedder is None:
            return None
        small = len(text) <= self._core.settings.recall_embed_inline_max_chars
        burst_us = self._core.settings.recall_embed_inline_burst_ms * 1000
        return small and (last is None or now - last >= burst_us)

    def queued(self, owner: Scope, conversation_id: str) -> bool:
        """Whether the embedding job this process queued for the conversation is not due
        yet (it will embed what is appended now: no need to queue it again)."""
        due = self._queued.get(conversation_id or self._scope_target(owner))
        return due is not None and self._core.rt.clock() < due - _QUEUED_MARGIN_US

    @staticmethod
    def _scope_target(owner: Scope) -> str:
        return f"scope:{owner.tenant}:{owner.user}:{owner.agent_key}"

    def queue_embedding(self, owner: Scope, conversation_id: str | None) -> Op[None]:
        """Queue the debounced ``recall.embed`` job of a conversation (None: of ``owner``'s
        whole scope), unless the job this process queued for it is not due yet."""
        rt = self._core.rt
        now = rt.clock()
        target = conversation_id or self._scope_target(owner)
        if self.queued(owner, target):
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

    def _forget_user(self, tenant: str, user: str) -> Op[None]:
        """A deleted user's vectors leave this process's memory too (other processes drop
        theirs at their next search of the user, or when the cache evicts them)."""
        if self._index is not None:
            self._index.forget_owner(tenant, user)
        yield from ()

    @property
    def _cache_bytes(self) -> int:
        return self._core.settings.vector_cache_mb * 2**20

    def vector_index(self) -> PlannedIndex | None:
        emb = self.embedder
        if emb is None:
            return None
        if self._index is None or self._index.space.embedder != emb.identity:
            from memstrata.vectors import Space, open_vector_index

            self._index = open_vector_index(
                self._core.engine, Space(emb.identity, emb.dim), cache_bytes=self._cache_bytes
            )
        return self._index

    async def avector_index(self) -> PlannedIndex | None:
        emb = self.embedder
        if emb is None:
            return None
        if self._index is None or self._index.space.embedder != emb.identity:
            from memstrata.vectors import Space, aopen_vector_index

            self._index = await aopen_vector_index(
                self._core.engine, Space(emb.identity, emb.dim), cache_bytes=self._cache_bytes
            )
        return self._index

    # -- embedding ---------------------------------------------------------------------------

    @staticmethod
    def items(
        docs: Sequence[idx.PendingDoc], vectors: Sequence[Sequence[float]]
    ) -> list[VectorItem]:
        from memstrata.vectors import VectorItem

        return [
            VectorItem(
                message_vector_id(d.message.conversation_id, d.message.id),
                d.owner,
                d.message.conversation_id,
                d.message.id,
                v,
            )
            for d, v in zip(docs, vectors, strict=True)
        ]

    @staticmethod
    def texts(docs: Sequence[idx.PendingDoc]) -> list[str]:
        return [document_text(d.message) for d in docs]

    @staticmethod
    def store_op(
        index: PlannedIndex,
        docs: Sequence[idx.PendingDoc],
        items: Sequence[VectorItem],
        *,
        rows_first: bool = False,
    ) -> Op[int]:
        """Store ``items`` and mark their messages embedded. ``rows_first`` (SQLite, docs
        not read from the recall rows): write their ``recall_docs`` rows first, in the same
        transaction, so the mark lands on a row (their keywords follow with the next flush,
        see :mod:`memstrata.recall.keywords`)."""
        if rows_first:
            yield from keywords.docs_ahead([(d.owner, d.message) for d in docs])
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
