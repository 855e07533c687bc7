"""The recall tier of ``mem.context``: the user's past messages most relevant to the
query that are not already in the context.

It runs after the recent window is chosen (``after_window``), so the window's
messages are left out rather than repeated, and searches like
``mem.recall.search`` (keyword ops, the vector op with the query vector the facade
embedded before the transaction, and recall's fusion with the tier's own weights
and candidate counts, :data:`TIER_FUSION`), over all of the user's
conversations. Each item is one message, rendered as ``speaker: content`` under a
heading with its date (``[2023-05-08]``, written once per run of messages of that day:
the date of every line at a fraction of its cost). The tier fills the room it is
offered itself, best first, then hands the chosen messages over in time order (oldest
first), followed by the best few of the admitted candidates that did not fit
(:data:`REPORTED_OVER`; the report names them). Items past those are never made.
"""

from __future__ import annotations

from collections.abc import Iterable
from typing import TYPE_CHECKING

from memstrata.context.budget import block, heading_cost
from memstrata.context.tiers import TierItem, TierRequest
from memstrata.errors import InvalidInput
from memstrata.longterm.currency import stale_messages
from memstrata.recall import keyed
from memstrata.recall.branchtruth import ActiveBranches
from memstrata.recall.fusion import FusionParams, fuse
from memstrata.recall.gate import ADMITTED, BELOW_FLOOR, PERSONAL, STANDS_OUT, RelevanceGate
from memstrata.recall.keyed import key_of
from memstrata.recall.relevance import RelevanceModel, Signals, background, reported
from memstrata.recall.search import MAX_K, LazyRule, candidates_op
from memstrata.recall.text import analyse_query, speaker_of
from memstrata.runtime import Runtime
from memstrata.storage.plan import Op
from memstrata.types import Message, Status

if TYPE_CHECKING:
    from memstrata.recall.service import RecallEngine

__all__ = ["BELOW_FLOOR", "DEFAULT_K", "TIER_FUSION", "RecallTier", "heading_of", "render_item"]

DEFAULT_K = 100
#: Keyword and vector candidates each (``mem.recall.search`` takes 100): a context holds
#: ~50 messages at 2k tokens, and the deeper lists feed the neighbour and segment shares.
CANDIDATES = 200
#: The tier's fusion: a budget of ~50 lines rewards depth (a flatter rank curve, more
#: weight to a message's own ranks than to its segment's) where search's top ten reward
#: the head. Chosen with ``memstrata bench context-quality`` (docs/benchmarks.md).
#: The session ranking (search's) is left out: its gain was measured on search's top ten.
TIER_FUSION = FusionParams(
    rrf_k=20.0,
    keyword_weight=1.3,
    time_boost=0.3,
    neighbour_share=0.4,
    segment_share=0.4,
    session_weight=0.0,
    window_weight=0.0,
)
MAX_TERMS = 12
MAX_DF = 200
#: Longest query text searched (the rest of a long message adds little but cost).
MAX_QUERY_CHARS = 10_000
#: Candidates turned away that the report names (the best ranked of them).
REPORTED_REJECTED = 5
#: Admitted candidates past the tier's room that it offers all the same (the best ranked
#: of them): the budget reports them, and takes them when an item ahead of them is left
#: out (carried by an injected fact). Past these the tier makes no items at all: at 8k
#: tokens a context's recall room holds a few lines of the ~60 the gate may admit.
REPORTED_OVER = 5
#: Verdicts that let a candidate in.
_IN = frozenset({ADMITTED, STANDS_OUT, PERSONAL})
#: The verdict on a message whose facts were all superseded (see longterm.currency).
SUPERSEDED = "superseded"


def render_item(message: Message) -> str:
    """One line per message: its speaker (the one a client named in its metadata, else
    its role) and content (line breaks folded). Its date is its heading."""
    content = " ".join(message.content.split())
    speaker = speaker_of(message)
    who = message.role.value if speaker is None else speaker
    return f"{who}: {content}"


def heading_of(message: Message) -> str:
    """The heading a recalled message is listed under: the day it was said."""
    return f"[{message.occurred_at.date().isoformat()}]"


class RecallTier:
    """Tier provider ``recall`` (registered by :meth:`RecallEngine.install`).

    ``k`` is how many messages it offers at most (those that fit its room in time
    order, then at most :data:`REPORTED_OVER` more, best first); the budget may grant
    fewer, whole messages only. Only candidates that clear ``gate`` are offered;
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
        self.relevance = RelevanceModel()
        self.fusion = TIER_FUSION

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
            # The other conversations by their active branch (this one: by the rule).
            truth=ActiveBranches(skip=None if rule is None else request.conversation_id),
            fusion=self.fusion,
        )
        ranked = fuse(found.candidates, temporal=info.temporal, params=self.fusion)
        bg = background(list(found.similarity.values()))
        considered: list[tuple[Message, float, float, Signals]] = []
        siblings: set[tuple[str, str | None, str]] = set()
        best_coverage, best_similarity = 0.0, None
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
            key = (c.conversation_id, c.id)
            sim = found.similarity.get(key)
            coverage = found.coverage.get(key, 0.0)
            best_coverage = max(best_coverage, coverage)
            if sim is not None:
                best_similarity = sim if best_similarity is None else max(best_similarity, sim)
            signals = Signals(coverage, sim, bg)
            considered.append((m, c.score, self.gate.evidence(coverage, sim), signals))
        verdicts = self.gate.verdicts(
            [e for _, _, e, _ in considered],
            best_coverage,
            best_similarity,
            [(sg.cosine, sg.standout) for *_, sg in considered],
            personal=info.personal,
        )
        if request.as_of is None:
            # A message whose facts were all superseded since is not current truth (as of
            # a past time it was: the facts' state then decides, through the facts tier).
            admitted = [c[0] for c, v in zip(considered, verdicts, strict=True) if v in _IN]
            stale = yield from stale_messages(request.scope, admitted, rt.clock())
            verdicts = [
                SUPERSEDED if v in _IN and key_of(c[0]) in stale else v
                for c, v in zip(considered, verdicts, strict=True)
            ]
        chosen = [c for c, v in zip(considered, verdicts, strict=True) if v in _IN][: self.k]
        rejected = [(c, v) for c, v in zip(considered, verdicts, strict=True) if v not in _IN][
            :REPORTED_REJECTED
        ]
        facts = yield from keyed.facts_from(request.scope, [m for m, *_ in chosen])
        items = in_time_order(
            (
                (m, self._item(request, m, score, evidence, sg, covered_by=facts.get(key_of(m))))
                for m, score, evidence, sg in chosen
            ),
            request,
            over=REPORTED_OVER,
        )
        # Candidates turned away: the assembler reports them (ids and reasons), never
        # injects them.
        return items + [
            self._item(request, m, score, evidence, sg, rejected=verdict)
            for (m, score, evidence, sg), verdict in rejected
        ]

    def _item(
        self,
        request: TierRequest,
        m: Message,
        score: float,
        evidence: float,
        signals: Signals,
        *,
        covered_by: list[str] | None = None,
        rejected: str | None = None,
    ) -> TierItem:
        extra: dict[str, object] = {}
        if covered_by:
            extra["covered_by"] = covered_by
        if rejected is not None:
            extra["rejected"] = rejected
        return request.item(
            m.id,
            render_item(m),
            message_id=m.id,
            conversation_id=m.conversation_id,
            heading=heading_of(m),
            score=round(score, 6),
            evidence=round(evidence, 3),
            relevance=reported(self.relevance(signals)),
            **extra,
        )


def in_time_order(
    offered: Iterable[tuple[Message, TierItem]], request: TierRequest, over: int | None = None
) -> list[TierItem]:
    """The items that fit the room the tier is offered (best first, each date's heading
    counted once), in time order, then the rest best first (the budget reports them), at
    most ``over`` of them (None: all). ``offered`` is read only until that many did not
    fit: the items past them are never made."""
    tok = request.tokenizer
    used = tok.count_message(block("recall", []))
    fits: list[tuple[Message, TierItem]] = []
    rest: list[TierItem] = []
    days: set[object] = set()
    for m, item in offered:
        heading = item.provenance["heading"]
        cost = item.tokens + (0 if heading in days else heading_cost(item, None, tok))
        if used + cost <= request.allowance:
            used += cost
            days.add(heading)
            fits.append((m, item))
        else:
            rest.append(item)
            if over is not None and len(rest) >= over:
                break
    fits.sort(key=lambda pair: (pair[0].occurred_at, pair[0].seq))
    return [item for _, item in fits] + rest
