"""``/v1/memory``: the health of the caller's long-term memory, and its consolidation.

A consolidation is a dry run unless ``dry_run`` is false. Applied, it runs at once
(200 with the applied diff) when it is planned without a model (a few SQL statements),
and as a ``longterm.consolidate`` job (202 with the job, seen in ``/v1/jobs``) when a
model plans it; ``background`` chooses explicitly. The job's id is the consolidation's
id, which ``/v1/memory/consolidations/{id}/revert`` undoes.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Response

from memstrata.server.auth import CallerScope, Mem
from memstrata.server.responses import JSONResponse
from memstrata.wire.jobs import JobOut
from memstrata.wire.memory import (
    ConsolidateIn,
    ConsolidationJobOut,
    ConsolidationOut,
    ConsolidationRevertOut,
    MemoryHealthOut,
)

__all__ = ["router"]

router = APIRouter(prefix="/v1/memory", tags=["memory health"])


@router.get(
    "/health",
    response_model=MemoryHealthOut,
    summary="Near duplicates, contradictions, stale and unused facts, and sizes",
    description=(
        "The caller's long-term memory: counts and examples (the caller's own facts only) "
        "of near-duplicate facts, contradiction candidates, stale facts (older than "
        "`stale_days`, never reinforced, never in a recorded context) and unused facts "
        "(`known: false` when usage is not recorded), with sizes."
    ),
)
async def memory_health(
    mem: Mem,
    scope: CallerScope,
    stale_days: Annotated[int, Query(ge=0, le=36500, description="Age of a stale fact.")] = 90,
    examples: Annotated[int, Query(ge=0, le=50, description="Examples per check.")] = 5,
    semantic: Annotated[
        bool, Query(description="Near duplicates by embedding similarity too.")
    ] = False,
) -> Response:
    report = await mem.memory.health(
        scope, stale_days=stale_days, examples=examples, semantic=semantic
    )
    return JSONResponse(MemoryHealthOut.encode(report))


_CONSOLIDATE_RESPONSES: dict[int | str, dict[str, Any]] = {
    202: {"model": ConsolidationJobOut, "description": "Applied as a background job."},
}


@router.post(
    "/consolidate",
    response_model=ConsolidationOut,
    responses=_CONSOLIDATE_RESPONSES,
    summary="Plan (dry run, the default) or apply a consolidation of the caller's facts",
    description=(
        "Plans merges of near-duplicate facts and supersessions of contradicted ones (by "
        "the model when one is configured, near-duplicate merging otherwise) and returns "
        "the diff. With `dry_run: false` the diff is applied through supersession only: "
        "every change is reversible and shows in `/v1/facts/{fid}/history`."
    ),
)
async def consolidate(
    mem: Mem, scope: CallerScope, body: Annotated[ConsolidateIn | None, Body()] = None
) -> Response:
    data = body or ConsolidateIn()
    background = data.background
    if background is None:
        background = mem.memory.planned_by_model
    if not data.dry_run and background:
        job = await mem.memory.schedule_consolidation(scope, semantic=data.semantic)
        return JSONResponse({"job": JobOut.encode(job)}, status_code=202)
    result = await mem.memory.consolidate(scope, dry_run=data.dry_run, semantic=data.semantic)
    return JSONResponse(ConsolidationOut.encode(result))


@router.post(
    "/consolidations/{consolidation_id}/revert",
    response_model=ConsolidationRevertOut,
    responses={404: {"description": "No such consolidation left to undo in this scope."}},
    summary="Undo an applied consolidation (through supersession, kept in fact history)",
)
async def revert_consolidation(mem: Mem, scope: CallerScope, consolidation_id: str) -> Response:
    result = await mem.memory.revert(scope, consolidation_id)
    return JSONResponse(ConsolidationRevertOut.encode(result))
