"""MCP over streamable HTTP at ``/mcp`` of the REST app, behind the REST API's keys.

The transport lives with the REST server (it reuses its authentication); the tools stay in
:mod:`memstrata.mcpserver`, which never imports the server. Load it through
:func:`memstrata.server.mcp.mount_mcp`, which needs no SDK.

Every request is authenticated the way a REST request is (``Authorization: Bearer``;
a user key acts as its user, an admin key names one in ``X-Memstrata-User``), before
the SDK sees it: a refused request gets the REST API's problem JSON (401, 403, 422,
429). The caller's scope travels in the ASGI scope of that request, where the tools
read it back, so a tool call can only ever act as the key that sent it.

The transport is stateless with JSON answers: no session lives in the process, so any
replica behind a load balancer can serve any request, and a session id carries no
authority. The SDK's session manager runs inside the app's lifespan (a fresh one per
start, since a manager runs once).
"""

from __future__ import annotations

from collections.abc import AsyncIterator
from contextlib import asynccontextmanager
from typing import Any

from fastapi import APIRouter, FastAPI
from fastapi.security import HTTPAuthorizationCredentials
from mcp.server.mcpserver import Context, MCPServer
from mcp.server.streamable_http_manager import StreamableHTTPSessionManager
from mcp.server.transport_security import TransportSecuritySettings
from starlette.requests import Request
from starlette.routing import Route
from starlette.types import Receive, Send
from starlette.types import Scope as AsgiScope

from memstrata.api import AsyncMemory
from memstrata.errors import BackendUnavailable, Unauthorized
from memstrata.mcpserver.server import build_server
from memstrata.server import auth
from memstrata.types import Scope

__all__ = ["SCOPE_KEY", "McpEndpoint", "caller_scope", "mount", "request_scope"]

SCOPE_KEY = "memstrata.scope"  # where the authenticated caller rides in the ASGI scope


def _credentials(request: Request) -> HTTPAuthorizationCredentials | None:
    scheme, _, token = request.headers.get("authorization", "").partition(" ")
    token = token.strip()
    if scheme.lower() != "bearer" or not token:
        return None
    return HTTPAuthorizationCredentials(scheme=scheme, credentials=token)


async def caller_scope(request: Request, memory: AsyncMemory) -> Scope:
    """The scope the request's key may act as; the REST API's rules and errors."""
    caller = await auth.principal(request, memory, _credentials(request))
    return await auth.user_scope(
        caller, request.headers.get(auth.USER_HEADER), request.headers.get(auth.AGENT_HEADER)
    )


def request_scope(ctx: Context) -> Scope:
    """The scope provider of the HTTP tools: the caller the endpoint authenticated."""
    request = ctx.request_context.request
    found = request.scope.get(SCOPE_KEY) if isinstance(request, Request) else None
    if not isinstance(found, Scope):
        raise Unauthorized("this MCP request carries no authenticated caller")
    return found


class _Manager:
    """Holds the SDK's session manager of the current app lifespan."""

    def __init__(self, server: MCPServer, max_body_bytes: int) -> None:
        self._server = server
        self._max_body_bytes = max_body_bytes
        self.current: StreamableHTTPSessionManager | None = None

    @asynccontextmanager
    async def lifespan(self, _: Any) -> AsyncIterator[None]:
        # Creating the app (and discarding it) is the SDK's public way to get a new
        # manager; the route below serves it.
        self._server.streamable_http_app(
            stateless_http=True,
            json_response=True,
            # Requests carry an API key, never ambient credentials such as cookies, so a
            # DNS-rebound page gains nothing; the Host check would only block real
            # deployments (any --host, any proxy).
            transport_security=TransportSecuritySettings(enable_dns_rebinding_protection=False),
            max_request_body_size=self._max_body_bytes,
        )
        manager = self._server.session_manager
        async with manager.run():
            self.current = manager
            try:
                yield
            finally:
                self.current = None


class McpEndpoint:
    """The ASGI app at ``/mcp``: authenticate, then hand the request to the SDK."""

    def __init__(self, manager: _Manager, memory: AsyncMemory) -> None:
        self._manager = manager
        self._memory = memory

    async def __call__(self, scope: AsgiScope, receive: Receive, send: Send) -> None:
        # A MemstrataError raised here reaches the app's problem handlers: same JSON as REST.
        caller = await caller_scope(Request(scope, receive), self._memory)
        manager = self._manager.current
        if manager is None:
            raise BackendUnavailable("the MCP endpoint is not running (app lifespan not started)")
        await manager.handle_request({**scope, SCOPE_KEY: caller}, receive, send)


def mount(app: FastAPI, memory: AsyncMemory, *, path: str = "/mcp") -> None:
    """Serve MCP at ``path`` of ``app`` (kept out of the OpenAPI document)."""
    settings = memory.admin.settings
    manager = _Manager(build_server(memory, request_scope), settings.max_body_bytes)
    router = APIRouter(lifespan=manager.lifespan)
    # A plain Starlette route: an ASGI app for every method, and never in the OpenAPI document.
    router.routes.append(Route(path, McpEndpoint(manager, memory), include_in_schema=False))
    # Including the router nests its lifespan inside the app's: the manager stops
    # before the app closes the memory.
    app.include_router(router)
