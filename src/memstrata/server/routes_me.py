"""``GET /v1/me``: who the API key speaks for.

A remote client reads it once to know its tenant and whether it holds an admin key,
so it can refuse a scope the key may not act as before sending anything, and knows
whether to name the user in headers.
"""

from __future__ import annotations

from typing import Annotated

from fastapi import APIRouter, Depends, Response
from pydantic import BaseModel, Field

from memstrata.server.auth import principal
from memstrata.server.responses import JSONResponse
from memstrata.storage.tenancy import Principal

__all__ = ["router"]

router = APIRouter(prefix="/v1", tags=["auth"])


class MeOut(BaseModel):
    tenant: str
    user: str | None = Field(description="The key's user; null for an admin key.")
    agent: str | None = Field(description="The key's agent; null (keys name no agent).")
    admin: bool = Field(description="An admin key names the user in X-Memstrata-User.")


@router.get("/me", response_model=MeOut, summary="The tenant, user and kind of the API key")
async def me(caller: Annotated[Principal, Depends(principal)]) -> Response:
    return JSONResponse(
        {"tenant": caller.tenant, "user": caller.user, "agent": None, "admin": caller.admin}
    )
