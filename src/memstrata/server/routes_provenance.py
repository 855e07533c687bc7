"""Prompt provenance over REST: what a reply's prompt held, and which replies held a fact.

Recording is ``record: true`` on ``POST /v1/conversations/{cid}/context`` (the answer
carries ``context_id``); linking is ``context_id`` on the reply's append.
"""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter, Response

from memstrata.server.auth import CallerScope, Mem
from memstrata.server.pagination import Cursor, Limit, page_body
from memstrata.server.responses import JSONResponse
from memstrata.wire.provenance import FactUseOut, FactUsePage, ProvenanceOut

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["provenance"])


_MESSAGE_404: dict[int | str, dict[str, Any]] = {
    404: {"description": "No such conversation or message in this scope."}
}
_FACT_404: dict[int | str, dict[str, Any]] = {
    404: {"description": "No such fact in this scope, nor in any of its context records."}
}


@router.get(
    "/conversations/{cid}/messages/{mid}/provenance",
    response_model=ProvenanceOut,
    responses=_MESSAGE_404,
    summary="What the model saw before this reply",
    description=(
        "The context record linked to the message (appended with `context_id`): its "
        "branch, budget, report and the ids of every injected item, each with its state "
        "now (a deleted fact is a tombstone: its id, never its text). `record` is null "
        "when no record is linked to the message."
    ),
)
async def reply_provenance(mem: Mem, scope: CallerScope, cid: str, mid: str) -> Response:
    return JSONResponse(ProvenanceOut.encode(await mem.provenance.get(scope, cid, mid)))


@router.get(
    "/facts/{fid}/usage",
    response_model=FactUsePage,
    responses=_FACT_404,
    summary="The replies whose prompts held this fact, newest first",
)
async def fact_usage(
    mem: Mem, scope: CallerScope, fid: str, limit: Limit = None, cursor: Cursor = None
) -> Response:
    page = await mem.provenance.fact_usage(scope, fid, limit=limit, cursor=cursor)
    return JSONResponse(page_body(page, FactUseOut.encode))
