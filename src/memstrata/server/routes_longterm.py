"""``/v1/facts`` and ``/v1/profile``: the caller's long-term memory, and
``/v1/memory/export``, both as one document; and ``/v1/conversations/{cid}/observe``,
which queues extraction of a conversation.

Extraction jobs are seen and retried through ``/v1/jobs`` like every other job.
"""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from fastapi import APIRouter, Body, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from memstrata.server.auth import CallerScope, Mem
from memstrata.server.pagination import Cursor, Limit, page_body
from memstrata.server.responses import JSONResponse
from memstrata.server.routes_receipts import DELETED, Caller, actor, deleted
from memstrata.server.schemas import FactCreate, FactPatch
from memstrata.wire.jobs import JobAnswer, JobOut
from memstrata.wire.longterm import (
    FactEventOut,
    FactHistoryOut,
    FactOut,
    FactPage,
    MemoryExportOut,
    ProfileOut,
    ProfileSectionOut,
)

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["long-term memory"])

_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"description": "No such fact in this scope."}}


@router.get(
    "/facts",
    response_model=FactPage,
    summary="List facts, newest first (default: those true now)",
    description=(
        "Every fact has two clocks: event time (`valid_from`, `valid_to`: when it held in the "
        "world) and system time (`recorded_at`, `superseded_at`: when memstrata held it as "
        "current). By default the list holds the facts true now: active and valid now. "
        "`as_of` asks what was true at that time as known then; `known_at` as known at "
        "another time."
    ),
)
async def list_facts(
    mem: Mem,
    scope: CallerScope,
    status: Annotated[
        str, Query(description="active (default), superseded, removed, evicted or all")
    ] = "active",
    category: Annotated[str | None, Query(description="Only facts of this category.")] = None,
    limit: Limit = None,
    cursor: Cursor = None,
    as_of: Annotated[
        datetime | None,
        Query(
            description="ISO 8601 time: the facts that were true then (event time), as known "
            "then (system time) unless known_at says otherwise. Active facts only."
        ),
    ] = None,
    known_at: Annotated[
        datetime | None,
        Query(
            description="ISO 8601 time: answer as memstrata knew it then (default: as_of; "
            "pass now for what is known now about as_of)."
        ),
    ] = None,
) -> Response:
    page = await mem.facts.list(
        scope,
        status=status,
        category=category,
        limit=limit,
        cursor=cursor,
        as_of=as_of,
        known_at=known_at,
    )
    return JSONResponse(page_body(page, FactOut.encode))


@router.post(
    "/facts",
    status_code=201,
    response_model=FactOut,
    responses={409: {"description": "An active fact already says the same."}},
    summary="Add a fact by hand",
)
async def add_fact(mem: Mem, scope: CallerScope, body: Annotated[FactCreate, Body()]) -> Response:
    fact = await mem.facts.add(
        scope,
        body.content,
        category=body.category,
        confidence=body.confidence,
        source_error=body.source_error,
    )
    return JSONResponse(
        FactOut.encode(fact), status_code=201, headers={"Location": f"/v1/facts/{fact.id}"}
    )


@router.get("/facts/{fid}", response_model=FactOut, responses=_NOT_FOUND, summary="One fact")
async def get_fact(mem: Mem, scope: CallerScope, fid: str) -> Response:
    return JSONResponse(FactOut.encode(await mem.facts.get(scope, fid)))


@router.patch(
    "/facts/{fid}",
    response_model=FactOut,
    responses={**_NOT_FOUND, 409: {"description": "Not active, or a duplicate."}},
    summary="Edit an active fact (its previous version stays in its history)",
)
async def edit_fact(
    mem: Mem, scope: CallerScope, fid: str, body: Annotated[FactPatch, Body()]
) -> Response:
    changes = body.model_dump(exclude_unset=True)
    return JSONResponse(FactOut.encode(await mem.facts.edit(scope, fid, **changes)))


@router.delete(
    "/facts/{fid}",
    status_code=204,
    responses={**_NOT_FOUND, **DELETED},
    summary="Erase a fact and its history",
)
async def delete_fact(mem: Mem, scope: CallerScope, caller: Caller, fid: str) -> Response:
    return deleted(await mem.facts.delete(scope, fid, actor=actor(caller)))


@router.get(
    "/facts/{fid}/history",
    response_model=FactHistoryOut,
    responses=_NOT_FOUND,
    summary="What happened to a fact and to the facts it replaced or was replaced by",
)
async def fact_history(mem: Mem, scope: CallerScope, fid: str) -> Response:
    events = await mem.facts.history(scope, fid)
    return JSONResponse({"items": [FactEventOut.encode(e) for e in events]})


@router.get("/profile", response_model=ProfileOut, summary="The caller's profile sections")
async def profile(
    mem: Mem,
    scope: CallerScope,
    as_of: Annotated[
        datetime | None,
        Query(
            description="ISO 8601 time: each section as it held then, as known then unless "
            "known_at says otherwise (a section rewritten since reads in its earlier version)."
        ),
    ] = None,
    known_at: Annotated[
        datetime | None,
        Query(description="ISO 8601 time: answer as memstrata knew it then (default: as_of)."),
    ] = None,
) -> Response:
    sections = await mem.longterm.profile(scope, as_of=as_of, known_at=known_at)
    return JSONResponse({"sections": {p.name: ProfileSectionOut.encode(p) for p in sections}})


@router.get(
    "/memory/export",
    response_model=MemoryExportOut,
    summary="The caller's memory (profile and facts) as one document",
    description=(
        "DeerFlow's memory.json shape, the same document as `memstrata export --format "
        "deerflow`: the profile sections and the active facts with their ids and sources. "
        "`memstrata import FILE --format deerflow` (or `mem.longterm.import_memory`) reads "
        "it back."
    ),
)
async def export_memory(mem: Mem, scope: CallerScope) -> Response:
    return JSONResponse(await mem.longterm.export(scope))


class ObserveIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    leaf_id: str | None = Field(default=None, description="Default: the active leaf.")


@router.post(
    "/conversations/{cid}/observe",
    status_code=202,
    response_model=JobAnswer,
    responses={404: {"description": "No such conversation or leaf in this scope."}},
    summary="Queue long-term extraction of a conversation now (DeerFlow's memory update)",
    description=(
        "Queues (or pushes back) the conversation's debounced `longterm.extract` job for the "
        "branch ending at `leaf_id`, with the correction and reinforcement signals of its "
        "last user turns, and answers 202 with the job. For clients that append with "
        "capture off, or want extraction without waiting for capture. With no LLM "
        "configured the job waits, queued (see `/v1/jobs`)."
    ),
)
async def observe(
    mem: Mem, scope: CallerScope, cid: str, body: ObserveIn | None = None
) -> Response:
    job = await mem.longterm.observe(scope, cid, leaf_id=(body or ObserveIn()).leaf_id)
    return JSONResponse({"job": JobOut.encode(job)}, status_code=202)
