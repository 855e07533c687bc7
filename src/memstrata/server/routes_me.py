"""``GET /v1/me``: who the API key speaks for.

A remote client reads it once to know its tenant and whether it holds an admin key,
so it can refuse a scope the key may not act as before sending anything, and knows
whether to name the user in headers.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Response

from memstrata.server.auth import principal
from memstrata.server.responses import JSONResponse
from memstrata.storage.tenancy import Principal
from memstrata.wire.auth import Identity, MeOut

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["auth"])


@router.get("/me", response_model=MeOut, summary="The tenant, user and kind of the API key")
async def me(caller: Annotated[Principal, Depends(principal)]) -> Response:
    # Keys name no agent (yet): the field is there for clients that read it.
    return JSONResponse(MeOut.encode(Identity(caller.tenant, caller.user, None, caller.admin)))
