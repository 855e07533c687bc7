"""Liveness, readiness and metrics: unauthenticated, for load balancers and scrapers."""

from __future__ import annotations

from fastapi import APIRouter, Request, Response
from fastapi.responses import JSONResponse, PlainTextResponse

from memstrata.errors import BackendUnavailable
from memstrata.server.auth import Mem
from memstrata.server.metrics import Metrics
from memstrata.storage.plan import Op, Query, read

__all__ = ["router"]

router = APIRouter(tags=["health"])

PROMETHEUS_TEXT = "text/plain; version=0.0.4; charset=utf-8"


def _ping() -> Op[None]:
    yield Query("SELECT 1")


@router.get("/healthz", summary="The process is up")
async def healthz() -> dict[str, str]:
    return {"status": "ok"}


@router.get(
    "/readyz",
    summary="The store answers a trivial read",
    responses={503: {"description": "The store cannot be reached."}},
)
async def readyz(mem: Mem) -> Response:
    try:
        await mem.core.engine.arun(read(_ping))
    except Exception as exc:
        raise BackendUnavailable(f"readiness check failed: {exc}") from exc
    return JSONResponse({"status": "ready"})


@router.get(
    "/metrics",
    summary="Request counts and latency sums (Prometheus text)",
    response_class=PlainTextResponse,
)
async def metrics(request: Request) -> Response:
    registry: Metrics = request.app.state.metrics
    return PlainTextResponse(registry.render(), media_type=PROMETHEUS_TEXT)
