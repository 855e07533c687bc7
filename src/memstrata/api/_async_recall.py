"""Recall facade (``mem.recall``). ``_sync_recall.py`` is generated from this file by
``scripts/unasync.py``."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from datetime import datetime

from memstrata.api._async_base import AsyncSubAPI
from memstrata.domain.recall import RecallResults, check_explain
from memstrata.embeddings.port import Embedder
from memstrata.longterm.clocks import parse_instant
from memstrata.recall import index as idx
from memstrata.recall import keywords
from memstrata.recall.catchup import AsyncCatchUp
from memstrata.recall.search import check_args
from memstrata.recall.search import search_op as _search_op
from memstrata.recall.service import FLUSH_BATCH, RecallEngine
from memstrata.types import Scope
from memstrata.usage import attributed, usage_purpose
from memstrata.validation import checked_scope as _scope

__all__ = ["AsyncRecall"]


class AsyncRecall(AsyncSubAPI):
    """Hybrid (keyword + vector) search over a user's past messages."""

    @property
    def _recall(self) -> RecallEngine:
        return self._core.recall

    @property
    def embedder(self) -> Embedder | None:
        """The embedder recall uses (metered), or None: keyword recall only."""
        return self._recall.embedder

    @property
    def keyword_only(self) -> str | None:
        """Why recall runs on keywords alone (no embedder), or None."""
        return self._recall.keyword_only

    @property
    def embedder_missing(self) -> bool:
        """Whether an embedder was wanted but cannot be used here (a degraded setup)."""
        return self._recall.embedder_missing

    @attributed
    async def search(
        self,
        scope: Scope,
        query: str,
        k: int = 10,
        *,
        conversation_id: str | None = None,
        leaf_id: str | None = None,
        message_range: int = 0,
        exclude_ids: Iterable[str] = (),
        include_other_branches: bool = False,
        as_of: datetime | str | None = None,
        min_relevance: float = 0.0,
        explain: bool = False,
        explain_ids: Iterable[str] = (),
    ) -> RecallResults:
        """The ``k`` messages of ``scope`` most relevant to ``query``, best first.

        ``conversation_id`` limits the search to one conversation (default: all of the
        user's); ``leaf_id`` (with ``conversation_id``) to the branch ending there;
        ``exclude_ids`` drops messages the caller already has (e.g. the recent window);
        ``message_range`` adds up to that many messages before and after each hit
        (marked ``neighbour_of``), so a result may hold more than ``k`` items (at most
        2,000 with neighbours: past that, the lower hits come alone).

        Only messages on each conversation's active branch are returned (with ``leaf_id``,
        on the branch ending there): not answers regenerated away, questions edited away
        or anything under them, in any of the user's conversations.
        ``include_other_branches`` searches every branch instead.

        ``as_of`` (a ``datetime`` or ISO 8601 text): search as memstrata stood then, over
        the messages created at or before that time only.

        Every hit carries ``relevance``, the calibrated probability in [0, 1] that it is
        relevant to the query; hits under ``min_relevance`` are left out (so a search
        may return fewer than ``k``, or none). ``explain`` adds each hit's ``signals``
        (keyword coverage and rank, cosine, the query's background similarity, fused
        score). ``explain_ids`` (at most 100 message ids) fills ``results.explained``:
        for each id, returned or why not (``memstrata.recall.search.WHY_NOT``; another
        user's message reads as ``unknown``).

        The search first embeds the caller's messages still waiting for a vector (up
        to the ``recall_read_embed_max`` setting, newest first), so a message appended
        before the call is found by meaning; ``results.pending`` counts those still
        waiting past that bound (found by keywords only until embedded).
        """
        s = _scope(scope)
        before = parse_instant(as_of, "as_of")
        info = RecallEngine.analyse(query)
        excluded = check_args(k, message_range, exclude_ids)
        floor, ids = check_explain(min_relevance, explain_ids)
        vectors = await self._recall.avector_index()
        qvec = None
        emb = self._recall.embedder
        catch_up = AsyncCatchUp(self._core)
        await catch_up.keywords()  # read-your-writes: full-text rows still waiting
        pending = 0
        if vectors is not None and emb is not None:
            pending = await catch_up.run(s)
            with usage_purpose("query"):
                qvec = (await emb.aembed([query]))[0]
        dialect = self._core.engine.dialect
        params = self._recall.params
        results: RecallResults = await self._read(
            _search_op,
            dialect,
            vectors,
            s,
            info,
            qvec,
            k=k,
            conversation_id=conversation_id,
            leaf_id=leaf_id,
            message_range=message_range,
            excluded=excluded,
            params=params,
            include_other_branches=bool(include_other_branches),
            created_by=before,
            min_relevance=floor,
            explain=bool(explain),
            explain_ids=ids,
        )
        results.pending = pending
        return results

    @attributed
    async def flush(
        self,
        scope: Scope | None = None,
        *,
        conversation_id: str | None = None,
        limit: int | None = None,
        reindex: bool = False,
        progress: Callable[[int], None] | None = None,
    ) -> int:
        """Embed messages still waiting (of ``scope`` / ``conversation_id``; None: all);
        with ``reindex``, also those embedded by another embedder. Returns how many."""
        vectors = await self._recall.avector_index()
        emb = self._recall.embedder
        if vectors is None or emb is None:
            return 0
        await AsyncCatchUp(self._core).keywords()  # the recall rows still waiting (SQLite)
        target = emb.identity if reindex else None
        done, after = 0, 0
        while limit is None or done < limit:
            size = FLUSH_BATCH if limit is None else min(FLUSH_BATCH, limit - done)
            docs = await self._read(
                idx.pending,
                scope=scope,
                conversation_id=conversation_id,
                embedder=target,
                after_seq=after,
                limit=size,
            )
            if not docs:
                break
            items = RecallEngine.items(docs, await emb.aembed(RecallEngine.texts(docs)))
            await self._write(RecallEngine.store_op, vectors, docs, items)
            done += len(docs)
            after = docs[-1].message.seq
            if progress is not None:
                progress(len(docs))
        return done

    async def pending(self, scope: Scope | None = None) -> int:
        """Messages whose vector is missing or was made by another embedder than the
        current one (what :meth:`flush` with ``reindex=True`` would embed)."""
        emb = self._recall.embedder
        if emb is None:
            return 0
        identity = emb.identity
        await AsyncCatchUp(self._core).keywords()  # the recall rows still waiting (SQLite)
        return await self._read(idx.count_pending, scope, identity)

    async def backfill(self, progress: Callable[[int], None] | None = None) -> int:
        """Add to the keyword index every message stored before recall indexed it."""
        dialect = self._core.engine.dialect
        # What waits for a flush is not stored "before recall": written first, not counted.
        await AsyncCatchUp(self._core).keywords()
        total, after = 0, 0
        while True:
            batch = await self._read(idx.unindexed, after, 500)
            if not batch:
                return total
            await self._write(keywords.index_batch, dialect, batch)
            total += len(batch)
            after = batch[-1][0].seq
            if progress is not None:
                progress(len(batch))
