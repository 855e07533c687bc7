"""Background jobs: a user sees its own; an admin sees the tenant's, or one user's."""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

from fastapi import APIRouter, Depends, Query, Response

from memstrata.api._async import AsyncMemory
from memstrata.jobs import Job
from memstrata.jobs.ops import JobStatus
from memstrata.server.auth import Mem, UserOrTenant, principal
from memstrata.server.pagination import Cursor, Limit, page_body
from memstrata.server.responses import JSONResponse
from memstrata.storage.tenancy import Principal
from memstrata.wire.jobs import JobOut, JobPage

__all__ = ["router"]

router = APIRouter(prefix="/v1/jobs", tags=["jobs"])

_NOT_FOUND: dict[int | str, dict[str, Any]] = {404: {"description": "No such job in your scope."}}


_TRACEBACK = "\nTraceback (most recent call last):"


def _render(
    mem: AsyncMemory, caller: Principal, blocked: dict[str, str] | None = None
) -> Callable[[Job], dict[str, Any]]:
    def render(job: Job) -> dict[str, Any]:
        out = JobOut.encode(job)
        if blocked is not None:  # this process's reasons and the tenant's budgets
            out["blocked"] = blocked.get(job.id)
        else:
            out["blocked"] = mem.jobs.blocked(job.kind) if job.status is JobStatus.QUEUED else None
        if not caller.admin and out["last_error"]:
            # The traceback names server files: operators (admin keys) see it, users do not.
            out["last_error"] = out["last_error"].split(_TRACEBACK, 1)[0]
        return out

    return render


Caller = Annotated[Principal, Depends(principal)]


@router.get("", response_model=JobPage, summary="List jobs, newest first")
async def list_jobs(
    mem: Mem,
    owner: UserOrTenant,
    caller: Caller,
    status: Annotated[str | None, Query(description="queued, running, done or dead")] = None,
    limit: Limit = None,
    cursor: Cursor = None,
) -> Response:
    tenant, user = owner
    page = await mem.jobs.list(tenant=tenant, user=user, status=status, limit=limit, cursor=cursor)
    blocked = await mem.jobs.blocked_reasons(page.items)
    body = page_body(page, _render(mem, caller, blocked))
    # Queued jobs wait silently when no worker runs: say so beside them.
    body["worker_warning"] = (await mem.jobs.presence(tenant=tenant, user=user)).warning
    return JSONResponse(body)


@router.get("/{jid}", response_model=JobOut, responses=_NOT_FOUND, summary="One job")
async def get_job(mem: Mem, owner: UserOrTenant, caller: Caller, jid: str) -> Response:
    tenant, user = owner
    job = await mem.jobs.get(jid, tenant=tenant, user=user)
    return JSONResponse(_render(mem, caller, await mem.jobs.blocked_reasons([job]))(job))


@router.post(
    "/{jid}/retry",
    response_model=JobOut,
    responses={**_NOT_FOUND, 409: {"description": "The job is not dead."}},
    summary="Send a dead job back to the queue",
)
async def retry_job(mem: Mem, owner: UserOrTenant, caller: Caller, jid: str) -> Response:
    tenant, user = owner
    await mem.jobs.get(jid, tenant=tenant, user=user)  # 404 outside the caller's scope
    return JSONResponse(_render(mem, caller)(await mem.jobs.retry(jid, tenant=tenant)))
