"""Recall: search the caller's past messages (hybrid keyword + semantic)."""

from __future__ import annotations

from datetime import datetime

from fastapi import APIRouter
from pydantic import BaseModel, ConfigDict, Field

from memstrata.domain.recall import MAX_EXPLAIN_IDS
from memstrata.recall.service import MAX_K, MAX_RANGE
from memstrata.server.auth import CallerScope, Mem
from memstrata.server.responses import JSONResponse
from memstrata.wire.recall import ExplanationOut, HitOut, SearchOut

__all__ = ["router"]

router = APIRouter(prefix="/v1/recall", tags=["recall"])


class SearchIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    query: str = Field(min_length=1, max_length=10_000)
    k: int = Field(default=10, ge=1, le=MAX_K)
    conversation_id: str | None = None
    leaf_id: str | None = None
    message_range: int = Field(default=0, ge=0, le=MAX_RANGE)
    include_other_branches: bool = Field(
        default=False,
        description="Also messages off the active branches: answers regenerated away, "
        "questions edited away (by default each conversation counts by its active branch, "
        "the one of leaf_id by that leaf's).",
    )
    as_of: datetime | None = Field(
        default=None,
        description="ISO 8601 time: search as of then, over the messages created at or "
        "before it only.",
    )
    min_relevance: float = Field(
        default=0.0,
        ge=0.0,
        le=1.0,
        description="Leave out hits whose calibrated relevance is below this.",
    )
    explain: bool = Field(default=False, description="Add each hit's per-signal scores.")
    explain_ids: list[str] = Field(
        default_factory=list,
        max_length=MAX_EXPLAIN_IDS,
        description="Message ids to account for: each is returned, or the answer says why not.",
    )


@router.post(
    "/search",
    response_model=SearchOut,
    responses={404: {"description": "No such conversation or leaf in your scope."}},
    summary="Search your past messages",
)
async def search(mem: Mem, scope: CallerScope, body: SearchIn) -> JSONResponse:
    hits = await mem.recall.search(
        scope,
        body.query,
        k=body.k,
        conversation_id=body.conversation_id,
        leaf_id=body.leaf_id,
        message_range=body.message_range,
        include_other_branches=body.include_other_branches,
        as_of=body.as_of,
        min_relevance=body.min_relevance,
        explain=body.explain,
        explain_ids=body.explain_ids,
    )
    return JSONResponse(
        {
            "hits": [HitOut.encode(h) for h in hits],
            "pending": hits.pending,
            "explained": [ExplanationOut.encode(e) for e in hits.explained],
        }
    )
