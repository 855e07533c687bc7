"""The recall tier of ``mem.context``: the user's past messages most relevant to the
query that are not already in the context.

It runs after the recent window is chosen (``after_window``), so the window's
messages are left out rather than repeated, and searches exactly like
``mem.recall.search`` (keyword ops, the vector op with the query vector the facade
embedded before the transaction, and recall's fusion), over all of the user's
conversations. Each item is one message, rendered as ``[date] role: content``.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memstrata.context.tiers import TierItem, TierRequest
from memstrata.errors import InvalidInput
from memstrata.recall import index as idx
from memstrata.recall.fusion import fuse
from memstrata.recall.gate import RelevanceGate
from memstrata.recall.index import key_of
from memstrata.recall.search import MAX_K, LazyRule, candidates_op
from memstrata.recall.text import analyse_query, speaker_of
from memstrata.runtime import Runtime
from memstrata.storage.plan import Op
from memstrata.types import Message, Status

if TYPE_CHECKING:
    from memstrata.recall.service import RecallEngine

__all__ = ["BELOW_FLOOR", "DEFAULT_K", "RecallTier", "render_item"]

DEFAULT_K = 60
CANDIDATES = 100
MAX_TERMS = 12
MAX_DF = 200
#: Longest query text searched (the rest of a long message adds little but cost).
MAX_QUERY_CHARS = 10_000
#: The report's reason when candidates were found but none cleared the floor.
BELOW_FLOOR = "below relevance floor"
#: Candidates below the floor named in the report (the best of them).
REPORTED_BELOW = 3


def render_item(message: Message) -> str:
    """One line per message: its date, its speaker (the one a client named in its
    metadata, else its role) and content (line breaks folded)."""
    when = message.occurred_at.date().isoformat()
    content = " ".join(message.content.split())
    speaker = speaker_of(message)
    who = message.role.value if speaker is None else speaker
    return f"[{when}] {who}: {content}"


class RecallTier:
    """Tier provider ``recall`` (registered by :meth:`RecallEngine.install`).

    ``k`` is how many messages it offers at most (best first); the budget may
    grant fewer, whole messages only. Only candidates that clear ``gate`` are offered;
    within the conversation being answered only ancestors of its leaf outside the
    window and the summary in use; of regeneration siblings only the best. Each item
    names the active facts that came from its message (``covered_by``), so the
    assembler leaves it out when one of them is in the same context.
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
        #: A term held by this many of the caller's messages or more is left out.
        self.max_df = MAX_DF
        self.gate = RelevanceGate()

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
        rule = None
        if request.leaf_id is not None:
            # Read once the candidates are known: most calls need no walk at all.
            rule = LazyRule(
                request.conversation_id,
                request.leaf_id,
                from_depth=request.window_from_depth,
                covered_depth=request.covered_depth,
            )
        # Vectors only from the space the query was embedded in: never mix spaces.
        vectors = self._engine.opened_index(request.embedder)
        qvec = request.query_vector if vectors is not None else None
        found = yield from candidates_op(
            self._engine.dialect,
            vectors,
            request.scope,
            info,
            qvec,
            n=self.candidates,
            conversation_id=None,
            excluded=frozenset(),  # the window is left out by the rule's depth range
            rule=None,
            lazy_rule=rule,
            cap=self.max_df,
            drop_common=True,
            created_by=request.as_of,
        )
        ranked = fuse(found.candidates, temporal=info.temporal, params=self._engine.params)
        considered: list[tuple[Message, float, float]] = []
        siblings: set[tuple[str, str | None, str]] = set()
        for c in ranked:
            m = found.messages[(c.conversation_id, c.id)]
            in_window = m.conversation_id == request.conversation_id and m.id in request.window_ids
            if in_window or m.status is not Status.COMPLETE:
                continue
            # Regeneration siblings (same parent, same role) say the same thing twice:
            # the best ranked of them stands for all.
            family = (m.conversation_id, m.parent_id, m.role.value)
            if m.parent_id is not None:
                if family in siblings:
                    continue
                siblings.add(family)
            sim = found.similarity.get(key_of(m))
            coverage = found.coverage.get(key_of(m), 0.0)
            considered.append((m, c.score, self.gate.evidence(coverage, sim)))
        admitted = self.gate.admit([e for _, _, e in considered])
        chosen = [c for c, ok in zip(considered, admitted, strict=True) if ok][: self.k]
        below = [] if chosen else considered[:REPORTED_BELOW]
        facts = yield from idx.facts_from(request.scope, [m for m, _, _ in chosen])
        items = [
            request.item(
                m.id,
                render_item(m),
                message_id=m.id,
                conversation_id=m.conversation_id,
                score=round(score, 6),
                evidence=round(evidence, 3),
                **({"covered_by": facts[key_of(m)]} if key_of(m) in facts else {}),
            )
            for m, score, evidence in chosen
        ]
        if not items:
            # Nothing cleared the floor: the assembler reports these, never injects them.
            items = [
                request.item(
                    m.id,
                    render_item(m),
                    message_id=m.id,
                    conversation_id=m.conversation_id,
                    score=round(score, 6),
                    evidence=round(evidence, 3),
                    rejected=BELOW_FLOOR,
                )
                for m, score, evidence in below
            ]
        return items
