"""The recall tier of ``mem.context``: the user's past messages most relevant to the
query that are not already in the context.

It runs after the recent window is chosen (``after_window``), so the window's
messages are left out rather than repeated, and searches exactly like
``mem.recall.search`` (keyword ops, the vector op with the query vector the facade
embedded before the transaction, and recall's fusion), over all of the user's
conversations. Each item is one message, rendered as ``[date] role: content``.
"""

from __future__ import annotations

from dataclasses import replace
from typing import TYPE_CHECKING

from memstrata.context.tiers import TierItem, TierRequest
from memstrata.errors import InvalidInput
from memstrata.recall.index import common_terms
from memstrata.recall.service import MAX_K, search_op
from memstrata.recall.text import analyse_query
from memstrata.runtime import Runtime
from memstrata.storage.plan import Op
from memstrata.types import Message, Status

if TYPE_CHECKING:
    from memstrata.recall.service import RecallEngine

__all__ = ["DEFAULT_K", "RecallTier", "render_item"]

DEFAULT_K = 8
CANDIDATES = 40
MAX_TERMS = 12
MAX_DF = 500
#: Longest query text searched (the rest of a long message adds little but cost).
MAX_QUERY_CHARS = 10_000


def render_item(message: Message) -> str:
    """One line per message: its date, role and content (line breaks folded)."""
    when = message.occurred_at.date().isoformat()
    content = " ".join(message.content.split())
    return f"[{when}] {message.role.value}: {content}"


class RecallTier:
    """Tier provider ``recall`` (registered by :meth:`RecallEngine.install`).

    ``k`` is how many messages it offers at most (best first); the budget may
    grant fewer, whole messages only.
    """

    tier = "recall"
    after_window = True

    def __init__(self, engine: RecallEngine, k: int = DEFAULT_K) -> None:
        self._engine = engine
        self.k = k
        #: Keyword and vector candidates fused per call (``mem.recall.search`` takes 100).
        self.candidates = CANDIDATES
        #: Query terms searched (a whole user message can hold many; each costs a posting list).
        self.max_terms = MAX_TERMS
        #: A term found in this many indexed messages or more is left out of the tier's search.
        self.max_df = MAX_DF

    @property
    def k(self) -> int:
        return self._k

    @k.setter
    def k(self, value: int) -> None:
        if isinstance(value, bool) or not isinstance(value, int) or not 0 <= value <= MAX_K:
            raise InvalidInput(f"the recall tier's k must be an integer in 0..{MAX_K}", field="k")
        self._k = value

    def provide(self, rt: Runtime, request: TierRequest) -> Op[list[TierItem]]:
        query = (request.query or "")[:MAX_QUERY_CHARS]
        if self.k == 0 or not query.strip():
            return []
        info = analyse_query(query, max_terms=self.max_terms)
        # Terms so common that ranking them would read a large part of the index cost the
        # most and tell the least (bm25 weights them near zero): the tier skips them.
        common = yield from common_terms(self._engine.dialect, info.terms, self.max_df)
        if common:
            info = replace(info, terms=tuple(t for t in info.terms if t not in common))
        # Vectors only from the space the query was embedded in: never mix spaces.
        vectors = self._engine.opened_index(request.embedder)
        qvec = request.query_vector if vectors is not None else None
        excluded = request.window_ids
        hits = yield from search_op(
            self._engine.dialect,
            vectors,
            request.scope,
            info,
            qvec,
            k=min(self.k + 4, MAX_K),  # a little slack for what is filtered below
            conversation_id=None,
            leaf_id=None,
            message_range=0,
            excluded=excluded,
            params=self._engine.params,
            # Fewer candidates than a search: this runs on every context call.
            candidates=self.candidates,
        )
        items: list[TierItem] = []
        for hit in hits:
            m = hit.message
            if m.id in excluded or m.status is not Status.COMPLETE:
                continue
            items.append(
                request.item(
                    m.id,
                    render_item(m),
                    message_id=m.id,
                    conversation_id=m.conversation_id,
                    score=round(hit.score, 6),
                )
            )
            if len(items) == self.k:
                break
        return items
