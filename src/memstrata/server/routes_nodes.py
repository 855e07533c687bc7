"""``/v1/apps/{app}/conversations/{cid}/nodes/{node}``: node-scoped memory of workflow nodes.

The conversation must belong to the caller's scope (404 otherwise); a turn is
answered 201 only once it is durable in the blob store.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response
from pydantic import BaseModel, ConfigDict, Field

from memstrata.server.auth import CallerScope, Mem
from memstrata.server.history_params import (
    DEFAULT_MAX_MESSAGES,
    DEFAULT_MAX_TOKENS,
    MaxMessages,
    message_cap,
)
from memstrata.server.responses import JSONResponse
from memstrata.types import FileRef
from memstrata.wire.nodes import NodeHistoryOut, TurnOut

__all__ = ["router"]

router = APIRouter(prefix="/v1/apps/{app}/conversations/{cid}/nodes/{node}", tags=["nodes"])

_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"description": "No such conversation in this scope."},
    503: {"description": "The blob store cannot be reached; nothing was stored."},
}


class TurnIn(BaseModel):
    model_config = ConfigDict(extra="forbid")

    message_id: str = Field(description="The caller's message id (for thread extraction).")
    parent_message_id: str | None = Field(
        default=None, description="Its parent; the all-zero id means 'no branch information'."
    )
    user_content: str = ""
    user_files: list[FileRef] = Field(default_factory=list)
    assistant_content: str = ""
    assistant_files: list[FileRef] = Field(default_factory=list)


@router.post(
    "/turns",
    status_code=201,
    response_model=TurnOut,
    responses=_NOT_FOUND,
    summary="Add a turn to a node's memory (201 once durable)",
    description=(
        "The same turn again (same `message_id`, same content) is a replay and writes "
        "nothing. Other content under a stored `message_id` replaces the turn, as Dify "
        "overwrites: history shows the new text in the old turn's place, the answer carries "
        "its `revision`, and the old text stays in the node log."
    ),
)
async def add_turn(
    mem: Mem, scope: CallerScope, app: str, cid: str, node: str, body: TurnIn
) -> Response:
    turn = await mem.nodes.add_turn(
        scope,
        app,
        cid,
        node,
        message_id=body.message_id,
        parent_message_id=body.parent_message_id,
        user_content=body.user_content,
        user_files=body.user_files,
        assistant_content=body.assistant_content,
        assistant_files=body.assistant_files,
    )
    return JSONResponse(TurnOut.encode(turn), status_code=201)


@router.get(
    "/history",
    response_model=NodeHistoryOut,
    responses=_NOT_FOUND,
    summary="Token-budgeted thread of a node's turns",
    description=(
        "The thread ending at `current_message_id` (default: the newest turn), walked by "
        "parent ids; whole turns are dropped, oldest first, to fit `max_tokens`. For a "
        "message with no stored turn yet, give `parent_message_id`."
    ),
)
async def history(
    mem: Mem,
    scope: CallerScope,
    app: str,
    cid: str,
    node: str,
    current_message_id: str | None = None,
    parent_message_id: Annotated[
        str | None, Query(description="Parent of a current message not stored yet.")
    ] = None,
    max_tokens: Annotated[int, Query(ge=0)] = DEFAULT_MAX_TOKENS,
    max_messages: MaxMessages = DEFAULT_MAX_MESSAGES,
    model: str | None = None,
) -> Response:
    options: dict[str, Any] = {}
    if parent_message_id is not None:
        options["parent_message_id"] = parent_message_id
    h = await mem.nodes.history(
        scope,
        app,
        cid,
        node,
        current_message_id=current_message_id,
        max_tokens=max_tokens,
        max_messages=message_cap(max_messages),
        model=model,
        **options,
    )
    return JSONResponse(NodeHistoryOut.encode(h))


@router.delete(
    "",
    status_code=204,
    response_class=Response,
    responses=_NOT_FOUND,
    summary="Delete a node's memory",
)
async def delete(mem: Mem, scope: CallerScope, app: str, cid: str, node: str) -> Response:
    await mem.nodes.delete(scope, app, cid, node)
    return Response(status_code=204)
