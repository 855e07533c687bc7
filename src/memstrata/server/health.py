"""Liveness, readiness and metrics: unauthenticated, for load balancers and scrapers."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import PlainTextResponse

from memstrata.errors import BackendUnavailable, MemstrataError
from memstrata.server.auth import Mem
from memstrata.server.metrics import Metrics, render_state
from memstrata.server.responses import JSONResponse

__all__ = ["router"]

router = APIRouter(tags=["health"])

PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"


@router.get("/healthz", summary="The process is up")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/readyz",
    summary="Every configured backend answers",
    responses={503: {"description": "A backend cannot be reached (problem+json names which)."}},
)
async def readyz(mem: Mem) -> Response:
    backends = await mem.core.acheck()
    down = {name: state for name, state in backends.items() if state != "ok"}
    if down:
        raise BackendUnavailable(
            "not ready: " + "; ".join(f"{name}: {state}" for name, state in down.items()),
            backends=backends,
        )
    return JSONResponse({"status": "ready", "backends": backends})


@router.get(
    "/metrics",
    summary="Requests, the job queue, model usage (Prometheus text)",
    response_class=PlainTextResponse,
)
async def metrics(request: Request, mem: Mem) -> Response:
    registry: Metrics = request.app.state.metrics
    try:
        jobs = await mem.jobs.stats()
    except MemstrataError:  # a scrape must still answer when the database does not
        jobs = None
    text = registry.render() + render_state(jobs, mem.core.usage.snapshot())
    return PlainTextResponse(text, media_type=PROMETHEUS_TEXT)
