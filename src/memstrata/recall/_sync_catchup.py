"""Generated from ``_async_catchup.py`` by ``scripts/unasync.py``: do not edit."""

from __future__ import annotations

import logging
from functools import partial
from typing import TYPE_CHECKING

import numpy as np

from memstrata import context as ctx_ops
from memstrata.errors import MemstrataError
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

__all__ = ["CatchUp"]

log = logging.getLogger("memstrata.recall")


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


class CatchUp:
    """Read-path embedding for one memory: bounded catch-up and the context's query vector."""

    def __init__(self, core: Core) -> None:
        self._core = core

    @property
    def _recall(self) -> RecallEngine:
        return self._core.recall

    @property
    def _fts(self) -> bool:
        return self._core.engine.dialect == "sqlite"

    def keywords(self, *, waiting: bool | None = None) -> int:
        """Write the full-text rows still waiting (SQLite; see ``recall.keywords``) before
        a keyword search; ``waiting`` is what the caller already read. Returns how many."""
        if not self._fts or not self._core.settings.recall_index:
            return 0
        if waiting is None:
            waiting = self._core.engine.run(read(kw.waiting))
        if not waiting:
            return 0
        return self._core.engine.run(write(kw.flush))

    def run(self, scope: Scope, *, limit: int | None = None) -> int:
        """Embed ``scope``'s waiting messages, newest first, at most ``limit`` of them
        (default: the ``recall_read_embed_max`` setting). Returns how many are still
        waiting after it (0: the read sees every message of the scope by meaning)."""
        vectors = self._recall.vector_index()
        emb = self._recall.embedder
        if vectors is None or emb is None:
            return 0
        most = self._core.settings.recall_read_embed_max if limit is None else limit
        done, below, full = 0, None, True
        while done < most:
            size = min(EMBED_BATCH, most - done)
            docs = self._core.engine.run(
                read(
                    partial(
                        idx.pending, scope=scope, before_seq=below, limit=size, newest_first=True
                    )
                )
            )
            if docs:
                self._embed_store(emb, vectors, docs)
                done += len(docs)
                below = docs[-1].message.seq
            full = len(docs) == size
            if not full:
                break
        if not full:
            return 0
        left = self._core.engine.run(read(partial(idx.count_waiting, scope)))
        if left:
            # Past the bound: the embedding job takes the rest (reads keep reporting it).
            self._core.engine.run(write(partial(self._recall.queue_embedding, scope, None)))
        return left

    def at_append(self, owner: Scope, message: Message) -> None:
        """After an append (or a completion) stored ``message`` for ``owner``: embed it
        now (``MEMSTRATA_RECALL_EMBED=inline``, see the module docstring), or queue the
        embedding job for it. The message is stored either way: a failure to embed it
        here is logged and leaves it to the job and the reads."""
        recall = self._recall
        inline = recall.embeds_inline(message)
        if inline is None:
            return
        try:
            vectors = recall.vector_index()
            emb = recall.embedder
            if inline and vectors is not None and emb is not None:
                doc = idx.PendingDoc(message, owner)
                # Its recall row may still wait (SQLite): written first, in the same write.
                self._embed_store(emb, vectors, [doc], rows_first=self._fts)
                return
            if not recall.queued(owner, message.conversation_id):
                self._core.engine.run(
                    write(partial(recall.queue_embedding, owner, message.conversation_id))
                )
        except Exception as exc:  # the append stands: reads and the job catch up
            detail = exc.message if isinstance(exc, MemstrataError) else repr(exc)
            log.warning("message %s left for the embedding job: %s", message.id, detail)

    def _embed_store(
        self,
        emb: Embedder,
        vectors: PlannedIndex,
        docs: list[idx.PendingDoc],
        *,
        rows_first: bool = False,
    ) -> list[list[float]]:
        """Embed and store ``docs``; returns their vectors (``rows_first``: see
        :meth:`RecallEngine.store_op`)."""
        made = emb.embed(RecallEngine.texts(docs))
        items = RecallEngine.items(docs, made)
        store = partial(RecallEngine.store_op, vectors, docs, items, rows_first=rows_first)
        self._core.engine.run(write(store))
        return made

    def context_query(
        self, scope: Scope, conversation_id: str, leaf_id: str | None, query: str | None
    ) -> tuple[str | None, list[float] | None, str | None, int]:
        """The recall tier's query, its vector and the vector's space (None, None when
        there is no embedder or nothing to ask), and how many of the caller's messages
        are still waiting after the catch-up (:meth:`run`). Given no ``query``, the
        newest user message on the branch is the query and its stored vector is used
        (embedded now, and stored, when waiting)."""
        recall = self._recall
        vectors = recall.vector_index()
        emb = recall.embedder
        if vectors is None or emb is None:
            self.keywords()
            return query, None, None, 0
        space = vectors.space
        if query is None:
            message, stored, waiting = self._core.engine.run(
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
            self.keywords(waiting=waiting)
            if message is None:
                return None, None, None, 0
            query = message.content
            qvec = self._message_vector(emb, vectors, message, stored)
            if qvec is not None:
                left = self.run(scope)
                return query, qvec, space.embedder, left
        else:
            self.keywords()
        if not query.strip():
            return query, None, None, 0
        left = self.run(scope)
        with usage_purpose("query"):  # the query's vector; messages' vectors are indexing
            qvec = (emb.embed([query[:MAX_QUERY_CHARS]]))[0]
        return query, qvec, space.embedder, left

    def _message_vector(
        self, emb: Embedder, vectors: PlannedIndex, message: Message, stored: bytes | None
    ) -> list[float] | None:
        """``message``'s own vector when it is the vector of its content (no speaker
        name or tool names indexed with it): the stored one, else made and stored now."""
        if document_text(message) != message.content.strip():
            return None
        if stored is not None:
            vector: list[float] = np.frombuffer(stored, dtype="<f4").tolist()
            return vector
        docs = self._core.engine.run(
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
        return (self._embed_store(emb, vectors, docs))[0]
