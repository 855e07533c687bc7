"""The FastAPI application: wiring only; every decision lives in the modules it mounts."""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager

import anyio
from fastapi import FastAPI

from memstrata.api import AsyncMemory
from memstrata.config import Settings
from memstrata.logs import configure_logging
from memstrata.server import (
    health,
    routes_admin,
    routes_context,
    routes_conversations,
    routes_jobs,
    routes_longterm,
    routes_me,
    routes_memory,
    routes_messages,
    routes_nodes,
    routes_provenance,
    routes_recall,
    routes_receipts,
    routes_state,
    routes_usage,
    ui,
)
from memstrata.server.hotlane import HotLane, LaneApp
from memstrata.server.keycache import KeyCache
from memstrata.server.limits import BodyLimit
from memstrata.server.mcp import mount_mcp  # loads the optional mcp SDK only if installed
from memstrata.server.metrics import Metrics, MetricsMiddleware
from memstrata.server.openapi import install_openapi
from memstrata.server.problems import install_problem_handlers
from memstrata.server.ratelimit import auth_failures, rate_limiter
from memstrata.server.requests import RequestMiddleware
from memstrata.server.responses import JSONResponse

__all__ = ["app_from_environment", "create_app"]

_DESCRIPTION = """\
memstrata's REST API. Authenticate with `Authorization: Bearer <key>`. A user key
acts as its user; an admin key names the user (and optional agent) with the
`X-Memstrata-User` / `X-Memstrata-Agent` headers. Errors are
`application/problem+json`. Lists are cursor-paginated (`?limit=&cursor=` ->
`{items, next_cursor}`).
"""


def create_app(memory: AsyncMemory | None = None, settings: Settings | None = None) -> FastAPI:
    """Build the app around ``memory`` (the caller keeps owning it), or open one from ``settings``.

    A memory opened here is closed when the application shuts down.
    """
    from memstrata import __version__

    if settings is None:
        settings = memory.admin.settings if memory is not None else Settings()
    owned = memory is None
    mem = memory if memory is not None else AsyncMemory.open(settings=settings)

    @asynccontextmanager
    async def lifespan(_: FastAPI) -> AsyncIterator[None]:
        mem.jobs.start_local_worker()
        async with anyio.create_task_group() as tasks:
            tasks.start_soon(health.watch_workers, mem)  # logs due jobs that have no worker
            try:
                yield
            finally:
                tasks.cancel_scope.cancel()
                if owned:
                    await mem.close()

    app = LaneApp(
        title="memstrata",
        version=__version__,
        description=_DESCRIPTION,
        lifespan=lifespan,
        openapi_url="/openapi.json",
        docs_url=None,  # the interactive docs page loads assets from the network
        redoc_url=None,
        default_response_class=JSONResponse,  # never fails on a value stored before checks
    )
    app.state.memory = mem
    app.state.settings = settings
    app.state.metrics = Metrics()
    app.state.limiter = rate_limiter(settings, mem.admin.redis_url)
    app.state.auth_failures = auth_failures(settings)
    app.state.key_cache = KeyCache(settings.key_cache_s)

    install_problem_handlers(app)
    app.include_router(health.router)
    app.include_router(routes_admin.router)
    app.include_router(routes_conversations.router)
    app.include_router(routes_messages.router)
    app.include_router(routes_messages.lookup_router)
    app.include_router(routes_jobs.router)
    app.include_router(routes_recall.router)
    app.include_router(routes_state.router)
    app.include_router(routes_context.router)
    app.include_router(routes_nodes.router)
    app.include_router(routes_longterm.router)
    app.include_router(routes_me.router)
    app.include_router(routes_provenance.router)
    app.include_router(routes_memory.router)
    app.include_router(routes_usage.router)
    app.include_router(routes_receipts.router)
    ui.mount_ui(app)  # the web UI at / and /ui/ (not in the OpenAPI)
    app.state.mcp = mount_mcp(
        app, mem
    )  # MCP (streamable HTTP) at /mcp behind the API keys; not in the OpenAPI
    install_openapi(app)

    # Added last is outermost: metrics see every answer, including a 413.
    app.add_middleware(BodyLimit, max_bytes=settings.max_body_bytes)
    app.add_middleware(MetricsMiddleware, metrics=app.state.metrics)
    app.add_middleware(RequestMiddleware)  # outermost: every answer carries its request id
    app.lane = HotLane(app)  # the plain hot GETs, with the same request-id and metrics layers
    return app


def app_from_environment() -> FastAPI:
    """The app of one process of ``memstrata serve --processes N``: each process opens the
    store from the ``MEMSTRATA_*`` environment its parent prepared and logs on its own."""
    settings = Settings()
    configure_logging(json_logs=settings.log_format == "json", level=settings.log_level)
    return create_app(settings=settings)
