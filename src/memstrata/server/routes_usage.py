"""Usage and budgets: what model calls cost (a user key sees itself; an admin key its
tenant, or one user), and the tenant's daily token budgets per purpose (admin keys)."""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Query, Response

from memstrata.errors import NotFound
from memstrata.server.auth import AdminKey, Mem, UserOrTenant
from memstrata.server.pagination import Cursor, Limit
from memstrata.server.responses import JSONResponse
from memstrata.usage.store import check_purpose
from memstrata.wire.usage import BudgetIn, BudgetOut, BudgetPage, UsageReportOut, budget_dict

__all__ = ["router"]

router = APIRouter(tags=["usage"])

_ADMIN_ONLY: dict[int | str, dict[str, Any]] = {403: {"description": "Not an admin key."}}


@router.get(
    "/v1/usage",
    response_model=UsageReportOut,
    summary="Model calls and tokens over a period, per purpose or per user",
)
async def get_usage(
    mem: Mem,
    owner: UserOrTenant,
    from_: Annotated[
        str | None,
        Query(alias="from", description="ISO 8601 start (inclusive); default 30 days before `to`."),
    ] = None,
    to: Annotated[str | None, Query(description="ISO 8601 end (exclusive); default now.")] = None,
    group_by: Annotated[str, Query(description="purpose (default) or user.")] = "purpose",
    limit: Limit = None,
    cursor: Cursor = None,
) -> Response:
    tenant, user = owner
    report = await mem.usage.report(
        tenant, user=user, start=from_, end=to, group_by=group_by, limit=limit, cursor=cursor
    )
    return JSONResponse(report.to_dict())


@router.get(
    "/v1/budgets",
    response_model=BudgetPage,
    responses=_ADMIN_ONLY,
    tags=["admin"],
    summary="The tenant's daily token budgets, with today's (UTC) use",
)
async def list_budgets(mem: Mem, caller: AdminKey) -> Response:
    items = [budget_dict(b) for b in await mem.usage.budgets(caller.tenant)]
    return JSONResponse({"items": items, "next_cursor": None})


@router.put(
    "/v1/budgets",
    response_model=BudgetOut,
    responses=_ADMIN_ONLY,
    tags=["admin"],
    summary="Set the tenant's daily token budget of a purpose (0 blocks it)",
)
async def put_budget(mem: Mem, caller: AdminKey, body: BudgetIn) -> Response:
    budget = await mem.usage.set_budget(caller.tenant, body.purpose, body.daily_tokens)
    return JSONResponse(budget_dict(budget))


@router.delete(
    "/v1/budgets/{purpose}",
    status_code=204,
    response_class=Response,
    responses={**_ADMIN_ONLY, 404: {"description": "No budget of that purpose."}},
    tags=["admin"],
    summary="Remove the tenant's budget of a purpose (no limit)",
)
async def delete_budget(mem: Mem, caller: AdminKey, purpose: str) -> Response:
    try:
        check_purpose(purpose)
    except Exception:
        raise NotFound(f"no budget for {purpose}", kind="budget") from None
    if not await mem.usage.clear_budget(caller.tenant, purpose):
        raise NotFound(f"no budget for {purpose}", kind="budget")
    return Response(status_code=204)
