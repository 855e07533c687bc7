"""Request ids and access logs for every HTTP request.

The id comes from the caller's ``X-Request-Id`` when it is a safe token (else a new
one), is bound for the request (so jobs it queues carry it, see
:mod:`memstrata.logs`), and goes back in the response's ``X-Request-Id``. One access
log record per request: method, route template, status, duration, request id.
"""

from __future__ import annotations

import logging
import time

from starlette.datastructures import MutableHeaders
from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memstrata.logs import bound_request_id, valid_request_id

__all__ = ["HEADER", "RequestMiddleware"]

HEADER = "X-Request-Id"
log = logging.getLogger("memstrata.access")


def _incoming(scope: Scope) -> str | None:
    for name, value in scope.get("headers", ()):
        if name == b"x-request-id":
            try:
                return bytes(value).decode("ascii")
            except UnicodeDecodeError:
                return None
    return None


class RequestMiddleware:
    def __init__(self, app: ASGIApp) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        rid = valid_request_id(_incoming(scope))
        status = 500
        start = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
                MutableHeaders(scope=message)[HEADER] = rid
            await send(message)

        with bound_request_id(rid):
            try:
                await self.app(scope, receive, send_with_id)
            finally:
                route = getattr(scope.get("route"), "path", None)
                log.info(
                    "%s %s %d",
                    scope["method"],
                    route if isinstance(route, str) else scope.get("path", ""),
                    status,
                    extra={
                        "request_id": rid,
                        "method": scope["method"],
                        "route": route if isinstance(route, str) else "unmatched",
                        "status": status,
                        "duration_ms": round((time.perf_counter() - start) * 1000, 3),
                    },
                )
