"""Agent state over REST: plan, iterations, run snapshots, checkpoints, working memory.

Versioned documents (plan, working memory) answer with an ``ETag`` (the version,
quoted). A write with ``If-Match`` succeeds only on that version, else 412;
``If-Match: *`` needs the document to exist and ``If-None-Match: *`` needs it to be
absent. A write without either creates or overwrites (last writer wins): the
precondition is the client's to ask for, so the API never answers 428.
Reading an expired or deleted checkpoint answers 410.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Header, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from memstrata.errors import InvalidInput, NotFound, PreconditionFailed
from memstrata.server.auth import CallerScope, Mem
from memstrata.server.pagination import Cursor, Limit, page_body
from memstrata.server.responses import JSONResponse
from memstrata.state import Format
from memstrata.wire.state import (
    CheckpointOut,
    IterationOut,
    IterationPage,
    PlanOut,
    SnapshotOut,
    WorkingMemoryOut,
)

__all__ = ["router"]

router = APIRouter(tags=["state"])

_CAS: dict[int | str, dict[str, Any]] = {
    404: {"description": "Not found in this scope."},
    412: {"description": "If-Match names a stale version (or If-None-Match: * and it exists)."},
}
IfMatch = Annotated[str | None, Header(alias="If-Match", description='"<version>" or *')]
IfNoneMatch = Annotated[str | None, Header(alias="If-None-Match", description="* to create only")]


def _etag(version: int) -> str:
    return f'"{version}"'


def _expected(if_match: str | None, if_none_match: str | None, current: int | None) -> int | None:
    """The version a write must find (0: absent), from the conditional headers."""
    if if_none_match is not None:
        if if_none_match.strip() != "*":
            raise InvalidInput("If-None-Match supports only *", field="If-None-Match")
        return 0
    if if_match is None:
        return None
    tag = if_match.strip()
    if tag == "*":
        if current is None:
            raise PreconditionFailed("If-Match: * but nothing exists yet")
        return current
    tag = tag.removeprefix("W/").strip('"')
    if not (tag.isascii() and tag.isdigit()):
        raise PreconditionFailed(f"If-Match {if_match!r} names no version of this document")
    return int(tag)


def _versioned(body: dict[str, Any], version: int, status: int = 200) -> Response:
    return JSONResponse(body, status_code=status, headers={"ETag": _etag(version)})


# -- plan ------------------------------------------------------------------------------------


class PlanIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    document: Any = Field(description="The plan: any JSON value.")


@router.get(
    "/v1/conversations/{cid}/plan",
    response_model=PlanOut,
    responses=_CAS,
    summary="The conversation's plan",
)
async def get_plan(mem: Mem, scope: CallerScope, cid: str) -> Response:
    plan = await mem.plans.get(scope, cid)
    return _versioned(PlanOut.encode(plan), plan.version)


@router.put(
    "/v1/conversations/{cid}/plan", response_model=PlanOut, responses=_CAS, summary="Write the plan"
)
async def put_plan(
    mem: Mem,
    scope: CallerScope,
    cid: str,
    body: PlanIn,
    if_match: IfMatch = None,
    if_none_match: IfNoneMatch = None,
) -> Response:
    current = None
    if if_match is not None and if_match.strip() == "*":
        try:
            current = (await mem.plans.get(scope, cid)).version
        except NotFound:
            await mem.conversations.get(scope, cid)  # 404 for a conversation of another scope
    expected = _expected(if_match, if_none_match, current)
    plan = await mem.plans.put(scope, cid, body.document, expected_version=expected)
    return _versioned(PlanOut.encode(plan), plan.version)


# -- iterations ------------------------------------------------------------------------------


class IterationIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    task: str = Field(min_length=1, max_length=255)
    outcome: str = Field(min_length=1, max_length=255)
    error: str | None = None
    attempt: int | None = Field(default=None, ge=1, description="Default: the task's next.")
    detail: dict[str, Any] | None = None


@router.get(
    "/v1/conversations/{cid}/iterations",
    response_model=IterationPage,
    summary="Iteration logs, oldest first",
)
async def list_iterations(
    mem: Mem,
    scope: CallerScope,
    cid: str,
    task: Annotated[str | None, Query(description="Only this task's attempts.")] = None,
    limit: Limit = None,
    cursor: Cursor = None,
) -> Response:
    page = await mem.iterations.list(scope, cid, task=task, limit=limit, cursor=cursor)
    return JSONResponse(page_body(page, IterationOut.encode))


@router.post(
    "/v1/conversations/{cid}/iterations",
    status_code=201,
    response_model=IterationOut,
    summary="Log an attempt",
)
async def append_iteration(mem: Mem, scope: CallerScope, cid: str, body: IterationIn) -> Response:
    item = await mem.iterations.append(
        scope,
        cid,
        body.task,
        outcome=body.outcome,
        error=body.error,
        attempt=body.attempt,
        detail=body.detail,
    )
    return JSONResponse(IterationOut.encode(item), status_code=201)


# -- run snapshots ---------------------------------------------------------------------------


class SnapshotIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    data: Any = Field(description="Opaque JSON the UI stores for this run.")


@router.get(
    "/v1/conversations/{cid}/runs/{run_id}/snapshot",
    response_model=SnapshotOut,
    summary="A run's UI snapshot",
)
async def get_snapshot(mem: Mem, scope: CallerScope, cid: str, run_id: str) -> Response:
    return JSONResponse(SnapshotOut.encode(await mem.snapshots.get(scope, cid, run_id)))


@router.put(
    "/v1/conversations/{cid}/runs/{run_id}/snapshot",
    response_model=SnapshotOut,
    summary="Store a run's snapshot",
)
async def put_snapshot(
    mem: Mem, scope: CallerScope, cid: str, run_id: str, body: SnapshotIn
) -> Response:
    return JSONResponse(SnapshotOut.encode(await mem.snapshots.put(scope, cid, run_id, body.data)))


# -- checkpoints -----------------------------------------------------------------------------


class CheckpointIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    state: Any
    ttl_s: float | None = Field(default=None, gt=0, description="Expires this many seconds on.")
    conversation_id: str | None = None


_EXPIRED: dict[int | str, dict[str, Any]] = {
    404: {"description": "No such checkpoint in this scope."},
    410: {"description": "The checkpoint expired or was deleted."},
}


@router.get(
    "/v1/checkpoints/{name}/{run_id}",
    response_model=CheckpointOut,
    responses=_EXPIRED,
    summary="Load a checkpoint",
)
async def get_checkpoint(mem: Mem, scope: CallerScope, name: str, run_id: str) -> Response:
    return JSONResponse(CheckpointOut.encode(await mem.checkpoints.load(scope, name, run_id)))


@router.put(
    "/v1/checkpoints/{name}/{run_id}",
    response_model=CheckpointOut,
    summary="Save (overwrite) a checkpoint",
)
async def put_checkpoint(
    mem: Mem, scope: CallerScope, name: str, run_id: str, body: CheckpointIn
) -> Response:
    saved = await mem.checkpoints.save(
        scope, name, run_id, body.state, ttl_s=body.ttl_s, conversation_id=body.conversation_id
    )
    return JSONResponse(CheckpointOut.encode(saved))


@router.delete(
    "/v1/checkpoints/{name}/{run_id}",
    status_code=204,
    response_class=Response,
    responses=_EXPIRED,
    summary="Expire a checkpoint (later reads answer 410)",
)
async def delete_checkpoint(mem: Mem, scope: CallerScope, name: str, run_id: str) -> Response:
    await mem.checkpoints.delete(scope, name, run_id)
    return Response(status_code=204)


# -- working memory --------------------------------------------------------------------------


class WorkingIn(BaseModel):
    model_config = ConfigDict(extra="forbid")
    content: Any = Field(description="Markdown text, or a JSON value with format json.")
    format: Format | None = Field(
        default=None, description="Omitted: markdown for a string, json for any other value."
    )
    json_schema: dict[str, Any] | None = None
    template: Any = None


ConversationParam = Annotated[
    str | None, Query(description="The conversation's document; omitted: the user's.")
]


@router.get(
    "/v1/working-memory",
    response_model=WorkingMemoryOut,
    responses=_CAS,
    summary="Read working memory",
)
async def get_working(
    mem: Mem, scope: CallerScope, conversation_id: ConversationParam = None
) -> Response:
    doc = await mem.working.get(scope, conversation_id=conversation_id)
    return _versioned(WorkingMemoryOut.encode(doc), doc.version)


@router.put(
    "/v1/working-memory",
    response_model=WorkingMemoryOut,
    responses=_CAS,
    summary="Write working memory",
)
async def put_working(
    mem: Mem,
    scope: CallerScope,
    body: WorkingIn,
    conversation_id: ConversationParam = None,
    if_match: IfMatch = None,
    if_none_match: IfNoneMatch = None,
) -> Response:
    current = None
    if if_match is not None and if_match.strip() == "*":
        try:
            current = (await mem.working.get(scope, conversation_id=conversation_id)).version
        except NotFound:
            current = None
    doc = await mem.working.put(
        scope,
        body.content,
        conversation_id=conversation_id,
        format=body.format,
        json_schema=body.json_schema,
        template=body.template,
        expected_version=_expected(if_match, if_none_match, current),
    )
    return _versioned(WorkingMemoryOut.encode(doc), doc.version)
