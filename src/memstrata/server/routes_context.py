"""Context assembly and compaction over REST."""

from __future__ import annotations

from datetime import datetime
from typing import Any, Literal

from fastapi import APIRouter, Response
from pydantic import BaseModel, ConfigDict, Field

from memstrata.errors import NotFound
from memstrata.server.auth import CallerScope, Mem
from memstrata.server.responses import JSONResponse
from memstrata.wire.context import CompactionOut, ContextOut, SummaryOut
from memstrata.wire.jobs import JobAnswer, JobOut

__all__ = ["router"]

router = APIRouter(prefix="/v1/conversations/{cid}", tags=["context"])

_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"description": "No such conversation or leaf in this scope."}
}


class ContextIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    leaf_id: str | None = None
    budget: int = Field(default=8000, ge=1, le=10_000_000)
    query: str | None = None
    model: str | None = None
    task: str | None = Field(
        default=None,
        max_length=200,
        description="Add this task's recent failed attempts (the iteration log) as a "
        "`<failed-attempts>` block; without it that tier is off.",
    )
    record: bool | None = Field(
        default=None,
        description="Store a context record (prompt provenance) and answer its `context_id`; "
        "send that id with the reply's append to link them. Default: the server's "
        "MEMSTRATA_CONTEXT_RECORD setting (off unless set).",
    )
    as_of: datetime | None = Field(
        default=None,
        description="ISO 8601 time: the facts, profile and recalled messages as of then "
        "(true then, as known then; messages created by then). The window is the branch "
        "ending at leaf_id.",
    )
    layout: Literal["cache", "classic"] | None = Field(
        default=None,
        description="The order of the messages: `cache` (volatile blocks after the window's "
        "stable part, a window that advances in steps, so providers can cache the prefix) or "
        "`classic` (every injected block before a sliding window). Default: the server's "
        "MEMSTRATA_CONTEXT_LAYOUT setting (`cache`).",
    )


class SummaryAnswer(BaseModel):
    summary: SummaryOut | None = Field(
        description="The rolling summary serving the branch; null when compaction has not "
        "summarised it yet."
    )


class CompactIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    leaf_id: str | None = None
    wait: bool = Field(
        default=False,
        description="Compact now and answer 200 with the outcome; default: queue a job (202).",
    )


@router.post(
    "/context",
    response_model=ContextOut,
    responses=_NOT_FOUND,
    summary="Messages for the next model call under one token budget, with a report",
)
async def context(mem: Mem, scope: CallerScope, cid: str, body: ContextIn) -> Response:
    ctx = await mem.context(
        scope,
        cid,
        leaf_id=body.leaf_id,
        budget=body.budget,
        query=body.query,
        model=body.model,
        task=body.task,
        record=body.record,
        as_of=body.as_of,
        layout=body.layout,
    )
    return JSONResponse(ContextOut.encode(ctx))


@router.post(
    "/compact",
    status_code=202,
    response_model=JobAnswer,
    responses={
        **_NOT_FOUND,
        200: {"model": CompactionOut, "description": "Compacted now (wait: true)."},
    },
    summary="Compact the branch: a background job (202), or now with wait: true (200)",
)
async def compact(
    mem: Mem, scope: CallerScope, cid: str, body: CompactIn | None = None
) -> Response:
    data = body or CompactIn()
    if data.wait:
        result = await mem.compact(scope, cid, leaf_id=data.leaf_id)
        return JSONResponse(CompactionOut.encode(result))
    job = await mem.compaction.schedule(scope, cid, leaf_id=data.leaf_id)  # 404 first
    return JSONResponse({"job": JobOut.encode(job)}, status_code=202)


@router.get(
    "/summary",
    response_model=SummaryAnswer,
    responses=_NOT_FOUND,
    summary="The compaction summary serving a branch",
)
async def summary(mem: Mem, scope: CallerScope, cid: str, leaf_id: str | None = None) -> Response:
    try:
        found = await mem.compaction.summary(scope, cid, leaf_id=leaf_id)
    except NotFound as err:
        # The conversation and leaf exist, but nothing summarises their branch yet.
        if err.detail.get("kind") != "summary":
            raise
        return JSONResponse({"summary": None})
    return JSONResponse({"summary": SummaryOut.encode(found)})
