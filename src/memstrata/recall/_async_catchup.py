"""Embedding on the read path, bounded in time (``_sync_catchup.py`` is generated).

New messages are embedded by the debounced ``recall.embed`` job after their append.
A read (``mem.context``, ``mem.recall.search``) only catches up on what is still
waiting, for at most :data:`CATCH_UP_SECONDS` of embedding: it embeds one message,
then as many more as the embedder's measured cost per message says fit in the rest of
the budget (never more than :data:`~memstrata.recall.service.EMBED_BATCH` at once, in
at most :data:`CATCH_UP_STEPS` steps, each one read and one write transaction).
What it leaves waiting is still found by keywords; the read queues the debounced
embedding job for it (whatever ``MEMSTRATA_RECALL_EMBED`` says, a read never leaves work
behind unqueued).

A context whose query is the newest user message (the default) reuses that message's
stored vector instead of embedding its text again; when the message is still waiting,
it is embedded first and stored, so it is embedded once either way.

On SQLite a read that searches keywords first writes the full-text rows still waiting
(:meth:`AsyncCatchUp.keywords`, see :mod:`memstrata.recall.keywords`), so it finds a
message appended a moment ago.
"""

from __future__ import annotations

import time
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from memstrata import context as ctx_ops
from memstrata.recall import index as idx
from memstrata.recall import keywords as kw
from memstrata.recall.service import EMBED_BATCH, RecallEngine
from memstrata.recall.text import document_text
from memstrata.recall.tier import MAX_QUERY_CHARS
from memstrata.storage.plan import Op, read, write
from memstrata.types import Message, Scope
from memstrata.usage import usage_purpose

if TYPE_CHECKING:
    from memstrata.api.core import Core
    from memstrata.embeddings.port import Embedder
    from memstrata.vectors.port import PlannedIndex

__all__ = ["CATCH_UP_SECONDS", "CATCH_UP_STEPS", "AsyncCatchUp"]

#: Longest a read spends embedding messages that are still waiting (beyond the first).
CATCH_UP_SECONDS = 0.05
#: Most embedding steps one read takes (bounds its extra transactions).
CATCH_UP_STEPS = 4


def _query_message(
    scope: Scope, conversation_id: str, leaf_id: str | None, embedder: str, dim: int, fts: bool
) -> Op[tuple[Message | None, bytes | None, bool]]:
    """The default query message, its stored vector, and (``fts``) whether full-text
    rows wait (one transaction for the three)."""
    waiting = (yield from kw.waiting()) if fts else False
    found = yield from ctx_ops.default_query_message(scope, conversation_id, leaf_id)
    if found is None:
        return None, None, waiting
    stored = yield from idx.stored_vector(found.conversation_id, found.id, embedder, dim)
    return found, stored, waiting


class AsyncCatchUp:
    """Read-path embedding for one memory: bounded catch-up and the context's query vector."""

    def __init__(self, core: Core) -> None:
        self._core = core

    @property
    def _recall(self) -> RecallEngine:
        return self._core.recall

    @property
    def _fts(self) -> bool:
        return self._core.engine.dialect == "sqlite"

    async def keywords(self, *, waiting: bool | None = None) -> int:
        """Write the full-text rows still waiting (SQLite; see ``recall.keywords``) before
        a keyword search; ``waiting`` is what the caller already read. Returns how many."""
        if not self._fts:
            return 0
        if waiting is None:
            waiting = await self._core.engine.arun(read(kw.waiting))
        if not waiting:
            return 0
        return await self._core.engine.arun(write(kw.flush))

    async def run(
        self,
        scope: Scope | None,
        *,
        conversation_id: str | None = None,
        budget_s: float = CATCH_UP_SECONDS,
    ) -> int:
        """Embed waiting messages of ``scope`` / ``conversation_id``, oldest first: at
        least one, then more while the budget lasts. Returns how many were embedded."""
        vectors = await self._recall.avector_index()
        emb = self._recall.embedder
        if vectors is None or emb is None:
            return 0
        done, after, spent, left = 0, 0, 0.0, True
        for _ in range(CATCH_UP_STEPS):
            size = self._step(done, budget_s - spent)
            if size < 1:
                break
            docs = await self._core.engine.arun(
                read(
                    partial(
                        idx.pending,
                        scope=scope,
                        conversation_id=conversation_id,
                        after_seq=after,
                        limit=size,
                    )
                )
            )
            if not docs:
                left = False
                break
            spent += (await self._embed_store(emb, vectors, docs))[1]
            done += len(docs)
            after = docs[-1].message.seq
            left = len(docs) == size
        if left and scope is not None:
            # The budget ran out first: the embedding job takes the rest.
            await self._core.engine.arun(
                write(partial(self._recall.queue_embedding, scope, conversation_id))
            )
        return done

    def _step(self, done: int, left_s: float) -> int:
        """How many messages the next step embeds: one first (progress on every read),
        then what the measured cost per message fits in ``left_s``."""
        per_doc = self._recall.seconds_per_doc
        if done == 0:
            return 1 if per_doc is None or per_doc > left_s else self._fit(per_doc, left_s)
        if per_doc is None:
            return 0
        return self._fit(per_doc, left_s)

    @staticmethod
    def _fit(per_doc: float, left_s: float) -> int:
        return min(EMBED_BATCH, int(left_s / per_doc)) if per_doc > 0 else EMBED_BATCH

    async def _embed_store(
        self, emb: Embedder, vectors: PlannedIndex, docs: list[idx.PendingDoc]
    ) -> tuple[list[list[float]], float]:
        """Embed and store ``docs``; their vectors and the seconds the embedder took."""
        t0 = time.perf_counter()
        made = await emb.aembed(RecallEngine.texts(docs))
        seconds = time.perf_counter() - t0
        self._recall.note_embed_cost(seconds, len(docs))
        items = RecallEngine.items(docs, made)
        await self._core.engine.arun(write(partial(RecallEngine.store_op, vectors, docs, items)))
        return made, seconds

    async def context_query(
        self, scope: Scope, conversation_id: str, leaf_id: str | None, query: str | None
    ) -> tuple[str | None, list[float] | None, str | None]:
        """The recall tier's query, its vector and the vector's space (None, None when
        there is no embedder or nothing to ask), after a bounded catch-up of the
        conversation. Given no ``query``, the newest user message on the branch is the
        query and its stored vector is used (embedded now, and stored, when waiting)."""
        recall = self._recall
        vectors = await recall.avector_index()
        emb = recall.embedder
        if vectors is None or emb is None:
            await self.keywords()
            return query, None, None
        space = vectors.space
        if query is None:
            message, stored, waiting = await self._core.engine.arun(
                read(
                    partial(
                        _query_message,
                        scope,
                        conversation_id,
                        leaf_id,
                        space.embedder,
                        space.dim,
                        self._fts,
                    )
                )
            )
            await self.keywords(waiting=waiting)
            if message is None:
                return None, None, None
            query = message.content
            qvec = await self._message_vector(emb, vectors, message, stored)
            if qvec is not None:
                await self.run(scope, conversation_id=conversation_id)
                return query, qvec, space.embedder
        else:
            await self.keywords()
        if not query.strip():
            return query, None, None
        await self.run(scope, conversation_id=conversation_id)
        with usage_purpose("query"):  # the query's vector; messages' vectors are indexing
            qvec = (await emb.aembed([query[:MAX_QUERY_CHARS]]))[0]
        return query, qvec, space.embedder

    async def _message_vector(
        self, emb: Embedder, vectors: PlannedIndex, message: Message, stored: bytes | None
    ) -> list[float] | None:
        """``message``'s own vector when it is the vector of its content (no speaker
        name or tool names indexed with it): the stored one, else made and stored now."""
        if document_text(message) != message.content.strip():
            return None
        if stored is not None:
            vector: list[float] = np.frombuffer(stored, dtype="<f4").tolist()
            return vector
        docs = await self._core.engine.arun(
            read(
                partial(
                    idx.pending,
                    conversation_id=message.conversation_id,
                    after_seq=message.seq - 1,
                    limit=1,
                )
            )
        )
        if not docs or docs[0].message.id != message.id:
            return None
        return (await self._embed_store(emb, vectors, docs))[0][0]
