"""Administration of a tenant's users (admin keys only)."""

from __future__ import annotations

from datetime import datetime
from typing import Any

from fastapi import APIRouter, Request, Response

from memstrata.errors import InvalidInput, NotFound
from memstrata.server.auth import AdminKey, Mem
from memstrata.server.keycache import KeyCache
from memstrata.server.pagination import Cursor, Limit, page_body
from memstrata.server.responses import JSONResponse
from memstrata.server.routes_receipts import DELETED, actor, deleted
from memstrata.types import Scope
from memstrata.wire.conversations import UserPage

__all__ = ["router"]

router = APIRouter(prefix="/v1/users", tags=["admin"])

_ADMIN_ONLY: dict[int | str, dict[str, Any]] = {403: {"description": "Not an admin key."}}


def _user(item: tuple[str, datetime]) -> dict[str, Any]:
    return {"id": item[0], "created_at": item[1].isoformat()}


@router.get("", response_model=UserPage, responses=_ADMIN_ONLY, summary="List the tenant's users")
async def list_users(
    mem: Mem, caller: AdminKey, limit: Limit = None, cursor: Cursor = None
) -> Response:
    page = await mem.users.list(caller.tenant, limit=limit, cursor=cursor)
    return JSONResponse(page_body(page, _user))


@router.delete(
    "/{user}",
    status_code=204,
    response_class=Response,
    responses={**_ADMIN_ONLY, 404: {"description": "No such user in this tenant."}, **DELETED},
    summary="Delete a user and everything the user owns",
)
async def delete_user(mem: Mem, caller: AdminKey, user: str, request: Request) -> Response:
    try:
        scope = Scope(caller.tenant, user)
    except InvalidInput:
        # A name that cannot be valid cannot exist either.
        raise NotFound(f"user {user} not found", kind="user") from None
    done = await mem.users.delete(scope, actor=actor(caller))
    cache = getattr(request.app.state, "key_cache", None)
    if isinstance(cache, KeyCache):
        cache.clear()  # the user's keys went with the user: refused from now on, not in a second
    return deleted(done.receipt)
