"""Messages of a conversation: append (idempotent), list, read, complete, leaves and history."""

from __future__ import annotations

from typing import Annotated, Any, Literal

from fastapi import APIRouter, Query, Request, Response

from memstrata import strictjson
from memstrata.errors import InvalidInput
from memstrata.server.auth import CallerScope, Mem
from memstrata.server.history_params import (
    DEFAULT_MAX_MESSAGES,
    DEFAULT_MAX_TOKENS,
    MaxMessages,
    message_cap,
)
from memstrata.server.limits import parsed_json
from memstrata.server.pagination import Cursor, Limit, page_body
from memstrata.server.responses import JSONResponse
from memstrata.server.routes_receipts import DELETED, Caller, actor, deleted
from memstrata.types import MessagePatch
from memstrata.wire.conversations import HistoryOut, MessageOut, MessagePage

__all__ = ["APPEND_OPERATION_ID", "lookup_router", "router"]

router = APIRouter(prefix="/v1/conversations/{cid}", tags=["messages"])
#: Messages named by id alone, for callers that do not know the conversation.
lookup_router = APIRouter(prefix="/v1/messages", tags=["messages"])

APPEND_OPERATION_ID = "append_message"

_NOT_FOUND: dict[int | str, dict[str, Any]] = {
    404: {"description": "No such conversation or message in this scope."}
}


async def _json_object(request: Request) -> dict[str, Any]:
    """The raw body as a dict, so a left-out ``parent_id`` stays left out (not ``null``)."""
    decoded, data = parsed_json(request.scope)  # decoded (strictly) at the edge
    if not decoded:
        raw = await request.body()
        # Strict whatever the content type said (the edge decodes JSON-typed bodies only).
        data = strictjson.loads(raw) if raw else None
    if not isinstance(data, dict):
        raise InvalidInput("the request body must be a JSON object")
    return data


@router.post(
    "/messages",
    status_code=201,
    response_model=MessageOut,
    operation_id=APPEND_OPERATION_ID,
    summary="Append a message",
    description=(
        "Leaving `parent_id` out appends after the conversation's active leaf; "
        "`parent_id: null` starts a new root; an id makes a child of that message "
        "(a regeneration or edit when it already has children). The new message "
        "becomes the active leaf. A client may send its own `id` (UUID): replaying "
        "the same id with the same content answers 200 with the stored message, "
        "with other content 409. `context_id` (from a recorded context) links this "
        "assistant reply to the prompt it answered, in the same transaction: an unknown "
        "record, or one of another conversation or scope, is 404; a record linked to "
        "another reply (or a reply linked to another record) 409; a role other than "
        "assistant 422; the message is stored only when the link is valid, and sending "
        "the same link again is a no-op."
    ),
    responses={
        200: {
            "description": "Replay of a message already stored with this id.",
            "model": MessageOut,
        },
        404: {
            "description": "No such conversation, no such parent in it, or no such "
            "context record (context_id) in it."
        },
        409: {
            "description": "The id exists with other content, the parent is pending, or "
            "the context record is linked to another reply."
        },
    },
    # The body is read raw (see _json_object); its schema is NewMessage, added by openapi.py.
    openapi_extra={
        "requestBody": {
            "required": True,
            "content": {
                "application/json": {"schema": {"$ref": "#/components/schemas/NewMessage"}}
            },
        }
    },
)
async def append_message(mem: Mem, scope: CallerScope, cid: str, request: Request) -> Response:
    body = await _json_object(request)
    message, created = await mem.messages.put(scope, cid, body)
    headers = {"Location": f"/v1/conversations/{cid}/messages/{message.id}"} if created else None
    return JSONResponse(
        MessageOut.encode(message), status_code=201 if created else 200, headers=headers
    )


@router.get(
    "/messages",
    response_model=MessagePage,
    responses=_NOT_FOUND,
    summary="List every message of a conversation, all branches, oldest first",
    description=(
        "Server order (`seq`): a parent always comes before its children, so the whole "
        "tree can be rebuilt page by page from `parent_id`."
    ),
)
async def list_messages(
    mem: Mem, scope: CallerScope, cid: str, limit: Limit = None, cursor: Cursor = None
) -> Response:
    page = await mem.messages.list(scope, cid, limit=limit, cursor=cursor)
    return JSONResponse(page_body(page, MessageOut.encode))


@router.get(
    "/messages/{mid}", response_model=MessageOut, responses=_NOT_FOUND, summary="Read a message"
)
async def get_message(mem: Mem, scope: CallerScope, cid: str, mid: str) -> Response:
    return JSONResponse(MessageOut.encode(await mem.messages.get(scope, cid, mid)))


@lookup_router.get(
    "/{mid}",
    response_model=MessageOut,
    responses={
        404: {"description": "No such message in this scope."},
        409: {"description": "The id names messages of several of the caller's conversations."},
    },
    summary="Find a message of the caller's scope by its id alone",
    description=(
        "The message (its `conversation_id` says where it is) for a caller that kept only "
        "the id, as n8n's `deleteMessages` does. 404 for another scope's message; 409 when "
        "the caller uses that id in two conversations (ids are unique per conversation)."
    ),
)
async def find_message(mem: Mem, scope: CallerScope, mid: str) -> Response:
    return JSONResponse(MessageOut.encode(await mem.messages.find(scope, mid)))


@router.delete(
    "/messages/{mid}",
    status_code=204,
    responses={**_NOT_FOUND, **DELETED},
    summary="Delete a message and the subtree under it (or, with mode=splice, it alone)",
    description=(
        "n8n's `deleteMessages` on a tree: the message goes with every reply, regeneration "
        "and follow-up under it, so every remaining branch stays whole. The active leaf moves "
        "to the message's parent when it was in the subtree (a deleted root: the newest "
        "remaining leaf). Summaries covering the messages are invalidated; recall and facts' "
        "provenance forget them (an extracted fact with no source left is erased)."
    ),
)
async def delete_message(
    mem: Mem,
    scope: CallerScope,
    caller: Caller,
    cid: str,
    mid: str,
    mode: Annotated[
        Literal["subtree", "splice"],
        Query(
            description="`subtree` (default): the message and everything under it. `splice`: "
            "the message alone, as n8n deletes; its children are re-attached to its parent "
            "(roots, for a root) with their replies."
        ),
    ] = "subtree",
) -> Response:
    return deleted(await mem.messages.delete(scope, cid, mid, actor=actor(caller), mode=mode))


@router.patch(
    "/messages/{mid}",
    response_model=MessageOut,
    summary="Complete a pending assistant message",
    description="Only a pending message can change; it becomes complete with this content.",
    responses={**_NOT_FOUND, 409: {"description": "The message is not pending."}},
)
async def complete_message(
    mem: Mem, scope: CallerScope, cid: str, mid: str, body: MessagePatch
) -> Response:
    return JSONResponse(MessageOut.encode(await mem.messages.complete(scope, cid, mid, body)))


@router.get(
    "/leaves",
    response_model=MessagePage,
    responses=_NOT_FOUND,
    summary="List the leaves (branch ends) of a conversation, oldest first",
)
async def list_leaves(
    mem: Mem, scope: CallerScope, cid: str, limit: Limit = None, cursor: Cursor = None
) -> Response:
    page = await mem.messages.leaves(scope, cid, limit=limit, cursor=cursor)
    return JSONResponse(page_body(page, MessageOut.encode))


@router.get(
    "/history",
    response_model=HistoryOut,
    responses=_NOT_FOUND,
    summary="Token-budgeted history of one branch",
    description=(
        "The branch ending at `leaf_id` (default: the active leaf), oldest first. Whole "
        "turns are dropped, oldest first, to fit `max_tokens`; leading system messages "
        "are always kept; pending messages are left out."
    ),
)
async def history(
    mem: Mem,
    scope: CallerScope,
    cid: str,
    leaf_id: Annotated[str | None, Query(description="Default: the active leaf.")] = None,
    max_tokens: Annotated[int, Query(ge=0)] = DEFAULT_MAX_TOKENS,
    max_messages: MaxMessages = DEFAULT_MAX_MESSAGES,
    model: Annotated[
        str | None, Query(description="Count tokens in this model's encoding (default o200k_base).")
    ] = None,
    before: Annotated[
        str | None,
        Query(
            description="A message id: the history ends just before that message's turn, on "
            "its branch, so `[*history, query]` never sends the query twice (Dify's pattern). "
            "Not with `leaf_id`."
        ),
    ] = None,
) -> Response:
    h = await mem.history(
        scope,
        cid,
        leaf_id=leaf_id,
        max_tokens=max_tokens,
        max_messages=message_cap(max_messages),
        model=model,
        before=before,
    )
    return JSONResponse(HistoryOut.encode(h))
