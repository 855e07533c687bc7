"""Wire models of recall search."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel, Field

from memstrata.domain.recall import Explanation, RecallHit
from memstrata.wire._codec import OmitNone, Via, Wire
from memstrata.wire.conversations import MessageOut

__all__ = ["ExplanationOut", "HitOut", "SearchOut"]


class HitOut(Wire):
    __domain__ = RecallHit

    # A whole message; published as an object, so the schema keeps saying so.
    message: Annotated[dict[str, Any], Via(MessageOut)]
    conversation_id: str
    score: float = Field(
        description="Orders the hits of one search (fusion; not comparable across searches)."
    )
    provenance: list[str]
    neighbour_of: str | None = None
    relevance: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Calibrated probability that the message is relevant to the query "
        "(a neighbour carries its hit's).",
    )
    signals: Annotated[
        dict[str, Any] | None,
        OmitNone,
        Field(description="With explain: the per-signal scores behind relevance and rank."),
    ] = None


class ExplanationOut(Wire):
    __domain__ = Explanation

    id: str
    conversation_id: str | None
    reason: str = Field(
        description="returned, or why not: below_relevance, ranked_below_k, other_branch, "
        "in_context, excluded, created_after_as_of, other_conversation, not_embedded, "
        "outside_candidate_pool, unknown (another user's message reads the same)."
    )
    relevance: Annotated[float | None, OmitNone] = None


class SearchOut(BaseModel):
    hits: list[HitOut]
    pending: int = Field(
        default=0,
        description="The caller's messages not yet searchable by meaning (past the read's "
        "embedding bound; found by keywords until embedded).",
    )
    explained: list[ExplanationOut] = Field(
        default_factory=list, description="One verdict per id of explain_ids."
    )
