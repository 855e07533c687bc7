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

from memstrata.logs import bound_request_id, log_direct, valid_request_id
from memstrata.server.problems import PROBLEM_JSON, printable, problem

__all__ = ["HEADER", "RequestMiddleware"]

HEADER = "X-Request-Id"
log = logging.getLogger("memstrata.access")
errors = logging.getLogger("memstrata.server")
_INTERNAL = problem(500, "internal", "internal server error").body


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
        started = False
        start = time.perf_counter()

        async def send_with_id(message: Message) -> None:
            nonlocal status
            nonlocal started
            if message["type"] == "http.response.start":
                started = True
                status = int(message["status"])
                MutableHeaders(scope=message)[HEADER] = rid
            await send(message)

        with bound_request_id(rid):
            try:
                await self.app(scope, receive, send_with_id)
            except Exception as exc:
                # Outermost handler of the app's own middleware: a bug anywhere inside is
                # answered here (problem JSON carrying the id), not by Starlette's
                # plain-text fallback that runs outside this middleware.
                errors.error(
                    "%s %s raised", scope["method"], printable(scope["path"]), exc_info=exc
                )
                if started:
                    raise
                await send_with_id(
                    {
                        "type": "http.response.start",
                        "status": 500,
                        "headers": [
                            (b"content-type", PROBLEM_JSON.encode()),
                            (b"content-length", str(len(_INTERNAL)).encode()),
                        ],
                    }
                )
                await send_with_id({"type": "http.response.body", "body": _INTERNAL})
            finally:
                route = getattr(scope.get("route"), "path", None)
                shown = route if isinstance(route, str) else printable(scope["path"])
                log_direct(
                    log,
                    logging.INFO,
                    f"{scope['method']} {shown} {status}",
                    {
                        "request_id": rid,
                        "method": scope["method"],
                        "route": route if isinstance(route, str) else "unmatched",
                        "status": status,
                        "duration_ms": round((time.perf_counter() - start) * 1000, 3),
                    },
                )
