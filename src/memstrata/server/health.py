"""Liveness, readiness and metrics: unauthenticated, for load balancers and scrapers."""

from __future__ import annotations

import logging
from typing import Any

import anyio
from fastapi import APIRouter, Request, Response
from fastapi.responses import PlainTextResponse

from memstrata.api import AsyncMemory
from memstrata.errors import BackendUnavailable, MemstrataError
from memstrata.jobs.presence import BEAT_S, STALE_S
from memstrata.server.auth import Mem
from memstrata.server.metrics import Metrics, render_state
from memstrata.server.responses import JSONResponse

__all__ = ["router", "watch_workers"]

log = logging.getLogger("memstrata.server")

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
    backends = await mem.admin.check(mem.admin.settings.ready_timeout_s)
    down = {name: state for name, state in backends.items() if state != "ok"}
    if down:
        raise BackendUnavailable(
            "not ready: " + "; ".join(f"{name}: {state}" for name, state in down.items()),
            backends=backends,
        )
    details = await _details(mem)
    warnings = [d["warning"] for d in details.values() if d.get("warning")]
    return JSONResponse(
        {"status": "ready", "backends": backends, "details": details, "warnings": warnings}
    )


async def _details(mem: AsyncMemory) -> dict[str, dict[str, Any]]:
    """What works in a degraded way: ready, but a person should know (the UI shows these)."""
    recall = mem.recall
    emb = recall.embedder
    keyword_only = recall.keyword_only
    details: dict[str, dict[str, Any]] = {
        "recall": {
            "semantic": emb is not None,
            "embedder": emb.identity if emb is not None else None,
            "warning": keyword_only if recall.embedder_missing else None,
            "note": keyword_only,
        }
    }
    try:
        details["jobs"] = (await mem.jobs.presence()).to_dict()
    except MemstrataError as exc:  # readiness already asked the database; keep answering
        details["jobs"] = {"warning": None, "error": exc.message}
    return details


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
    text = registry.render() + render_state(jobs, mem.usage.snapshot())
    return PlainTextResponse(text, media_type=PROMETHEUS_TEXT)


async def watch_workers(
    mem: AsyncMemory, *, first_s: float = BEAT_S, every_s: float = STALE_S
) -> None:
    """Log (once each time it starts) that jobs are due and no worker runs them.

    The first look waits ``first_s``, so this process's own worker has beaten by then.
    """
    await anyio.sleep(first_s)
    warned = False
    while True:
        try:
            warning = (await mem.jobs.presence()).warning
        except MemstrataError:  # the database is down: readiness reports that
            warning = None
        if warning and not warned:
            log.warning("%s", warning)
        warned = warning is not None
        await anyio.sleep(every_s)
