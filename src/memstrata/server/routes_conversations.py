"""``/v1/conversations``: create, list, read, update and delete conversations."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Body, Response

from memstrata.errors import InvalidInput
from memstrata.server.auth import CallerScope, Mem
from memstrata.server.pagination import Cursor, Limit, page_body
from memstrata.server.responses import JSONResponse
from memstrata.server.routes_receipts import DELETED, Caller, actor, deleted
from memstrata.server.schemas import ConversationCreate, ConversationPatch
from memstrata.wire.conversations import ConversationOut, ConversationPage

__all__ = ["router"]

router = APIRouter(prefix="/v1/conversations", tags=["conversations"])

_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"description": "No such conversation in this scope."}
}


@router.post(
    "",
    status_code=201,
    response_model=ConversationOut,
    summary="Create a conversation",
)
async def create_conversation(
    mem: Mem,
    scope: CallerScope,
    body: Annotated[ConversationCreate | None, Body()] = None,
) -> Response:
    data = body or ConversationCreate()
    conv = await mem.conversations.create(scope, title=data.title, metadata=data.metadata)
    return JSONResponse(
        ConversationOut.encode(conv),
        status_code=201,
        headers={"Location": f"/v1/conversations/{conv.id}"},
    )


@router.get("", response_model=ConversationPage, summary="List conversations, newest first")
async def list_conversations(
    mem: Mem, scope: CallerScope, limit: Limit = None, cursor: Cursor = None
) -> Response:
    page = await mem.conversations.list(scope, limit=limit, cursor=cursor)
    return JSONResponse(page_body(page, ConversationOut.encode))


@router.get(
    "/{cid}", response_model=ConversationOut, responses=_NOT_FOUND, summary="Read a conversation"
)
async def get_conversation(mem: Mem, scope: CallerScope, cid: str) -> Response:
    return JSONResponse(ConversationOut.encode(await mem.conversations.get(scope, cid)))


@router.patch(
    "/{cid}",
    response_model=ConversationOut,
    responses={
        404: {"description": "No such conversation, or no such message for active_leaf_id."}
    },
    summary="Update a conversation's title or metadata, or choose its active leaf",
)
async def update_conversation(
    mem: Mem, scope: CallerScope, cid: str, body: ConversationPatch
) -> Response:
    if "active_leaf_id" in body.model_fields_set and body.active_leaf_id is None:
        raise InvalidInput("active_leaf_id cannot be null", field="active_leaf_id")
    conv = await mem.conversations.update(
        scope, cid, title=body.title, metadata=body.metadata, active_leaf_id=body.active_leaf_id
    )
    return JSONResponse(ConversationOut.encode(conv))


@router.delete(
    "/{cid}",
    status_code=204,
    response_class=Response,
    responses={**_NOT_FOUND, **DELETED},
    summary="Delete a conversation and everything derived from it",
)
async def delete_conversation(mem: Mem, scope: CallerScope, caller: Caller, cid: str) -> Response:
    return deleted(await mem.conversations.delete(scope, cid, actor=actor(caller)))
