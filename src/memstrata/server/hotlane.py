"""The hot lane: the plain case of the two GETs called most, answered in front of FastAPI.

A chat app reads a conversation's history before each model call, and load balancers poll
``/healthz``. Through FastAPI's whole stack (its error, telemetry and body-limit layers,
memstrata's body limit, the exception layer, the router, the route's request objects and
dependency solving) such a request cost more server CPU than the history read itself.

:class:`HotLane` answers the plain case of ``GET /healthz`` and of
``GET /v1/conversations/{cid}/history`` (a bearer key, no admin headers, no body, and
only ``leaf_id``, ``max_tokens`` (digits) and ``max_messages`` (the declared pattern),
each once) with the same parts as the declared routes: the same request-id and metrics
middleware around it (so the same ``X-Request-Id``, access line, counters and 500 answer),
the same authentication and scope functions (:mod:`memstrata.server.auth`), the same call,
wire model and encoder, and the application's own problem handler for memstrata errors.
Anything else (another path or method, a missing or malformed key header, other
parameters, a value FastAPI would refuse, a body, an application mounted under a root
path, or OpenTelemetry configured, which FastAPI's own layer would trace) goes through the
whole application untouched, so its validation and problem bodies stay FastAPI's. The
OpenAPI document is the declared routes'.
"""

from __future__ import annotations

import inspect
import re
import time
from collections.abc import Callable
from dataclasses import dataclass
from typing import Any, cast
from urllib.parse import parse_qsl

from fastapi import FastAPI
from starlette.requests import Request
from starlette.types import ASGIApp, Receive, Scope, Send

from memstrata.api import AsyncMemory
from memstrata.errors import MemstrataError
from memstrata.server.auth import AGENT_HEADER, USER_HEADER, authenticate, scope_of
from memstrata.server.history_params import DEFAULT_MAX_MESSAGES, DEFAULT_MAX_TOKENS, message_cap
from memstrata.server.metrics import Metrics, MetricsMiddleware
from memstrata.server.requests import RequestMiddleware
from memstrata.server.responses import render_json
from memstrata.wire.conversations import HistoryOut

__all__ = ["HEALTHZ_PATH", "HISTORY_PATH", "HotLane", "LaneApp"]

HEALTHZ_PATH = "/healthz"
HISTORY_PATH = "/v1/conversations/{cid}/history"
_HISTORY = re.compile(r"/v1/conversations/([^/]+)/history")  # Starlette's ``{cid}``
_DIGITS = re.compile(r"[0-9]{1,12}")
_CAP = re.compile(r"[1-9][0-9]{0,12}|none")  # MaxMessages' pattern, anchored
_ADMIN_HEADERS = frozenset((USER_HEADER.lower().encode(), AGENT_HEADER.lower().encode()))
_HISTORY_QUERY = frozenset(("leaf_id", "max_tokens", "max_messages"))
_JSON = b"application/json"
_HEALTHY = render_json({"status": "ok"})
# Where a request the lane took carries what it found (an ASGI scope extension key).
_FOUND = "memstrata.lane"
# While no OpenTelemetry provider is set, look again at most this often (a provider is set
# once, at start-up, so one seen stays seen).
_TELEMETRY_LOOK_S = 1.0


@dataclass(frozen=True, slots=True)
class _Route:
    """What the request-id and metrics layers read of a matched route: its template."""

    path: str


_HEALTHZ_ROUTE = _Route(HEALTHZ_PATH)
_HISTORY_ROUTE = _Route(HISTORY_PATH)


@dataclass(frozen=True, slots=True)
class _History:
    secret: str
    cid: str
    query: dict[str, str]


def _plain_history(scope: Scope, cid: str) -> _History | None:
    """The key and query of a plain history request, else None."""
    authorization: bytes | None = None
    for name, value in scope["headers"]:
        if name == b"authorization":
            if authorization is None:  # Starlette's headers read the first one
                authorization = value
        elif name in _ADMIN_HEADERS:
            return None
    if authorization is None:
        return None
    scheme, _, secret = authorization.decode("latin-1").partition(" ")
    if scheme.lower() != "bearer" or not secret:
        return None
    items = parse_qsl(scope["query_string"].decode("latin-1"), keep_blank_values=True)
    query = dict(items)
    if len(query) != len(items) or not query.keys() <= _HISTORY_QUERY:
        return None
    if "max_tokens" in query and not _DIGITS.fullmatch(query["max_tokens"]):
        return None
    if "max_messages" in query and not _CAP.fullmatch(query["max_messages"]):
        return None
    return _History(secret, cid, query)


def _bodiless(scope: Scope) -> bool:
    """No request body: FastAPI's layers would read one (and memstrata's would check it)."""
    for name, value in scope["headers"]:
        if name == b"transfer-encoding" or (name == b"content-length" and value != b"0"):
            return False
    return True


# The OpenTelemetry API's stand-ins until a provider is set (FastAPI tests the same names).
_UNSET_PROVIDERS = frozenset(("ProxyTracerProvider", "_ProxyMeterProvider", "ProxyLoggerProvider"))


def _telemetry_configured() -> bool:
    """Whether a global OpenTelemetry provider is set: FastAPI's own layer would then trace
    or count the request, so the lane leaves it to the whole application."""
    try:
        from opentelemetry import _logs, metrics, trace
    except ImportError:  # pragma: no cover - FastAPI installs the API
        return False
    providers = (
        trace.get_tracer_provider(),
        metrics.get_meter_provider(),
        _logs.get_logger_provider(),
    )
    return any(type(p).__name__ not in _UNSET_PROVIDERS for p in providers)


async def _send_json(send: Send, body: bytes) -> None:
    """A 200 ``application/json`` answer, headers as Starlette's response writes them."""
    await send(
        {
            "type": "http.response.start",
            "status": 200,
            "headers": [(b"content-length", str(len(body)).encode()), (b"content-type", _JSON)],
        }
    )
    await send({"type": "http.response.body", "body": body})


class HotLane:
    """Finds the plain hot requests and answers them (see the module's docstring)."""

    def __init__(self, app: FastAPI) -> None:
        self.app = app
        self._telemetry = False
        self._looked = float("-inf")
        metrics = cast(Metrics, app.state.metrics)
        self._stack: ASGIApp = RequestMiddleware(MetricsMiddleware(self._answer, metrics=metrics))

    def _traced(self) -> bool:
        if not self._telemetry:
            now = time.monotonic()
            if now - self._looked >= _TELEMETRY_LOOK_S:
                self._looked = now
                self._telemetry = _telemetry_configured()
        return self._telemetry

    def take(self, scope: Scope) -> bool:
        """Whether the lane answers this request; if so it is marked for :meth:`__call__`."""
        if scope["type"] != "http" or scope["method"] != "GET" or scope.get("root_path"):
            return False
        path = scope["path"]
        found: Any
        if path == HEALTHZ_PATH:
            found, route = True, _HEALTHZ_ROUTE
        else:
            match = _HISTORY.fullmatch(path)
            if match is None:
                return False
            found = _plain_history(scope, match.group(1))
            if found is None:
                return False
            route = _HISTORY_ROUTE
        if not _bodiless(scope) or self._traced():
            return False
        scope[_FOUND] = found
        scope["route"] = route
        scope["app"] = self.app
        return True

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """Answer a request :meth:`take` took, through the request-id and metrics layers."""
        await self._stack(scope, receive, send)

    async def _answer(self, scope: Scope, receive: Receive, send: Send) -> None:
        found = scope[_FOUND]
        if not isinstance(found, _History):
            await _send_json(send, _HEALTHY)
            return
        request = Request(scope, receive)  # what authentication and the handler read
        mem = cast(AsyncMemory, self.app.state.memory)
        try:
            caller = await authenticate(request, mem, found.secret)
            h = await mem.history(
                scope_of(caller, None, None),
                found.cid,
                leaf_id=found.query.get("leaf_id"),
                max_tokens=int(found.query.get("max_tokens", DEFAULT_MAX_TOKENS)),
                max_messages=message_cap(found.query.get("max_messages", DEFAULT_MAX_MESSAGES)),
            )
        except MemstrataError as exc:
            await self._problem(request, exc, send)
            return
        await _send_json(send, render_json(HistoryOut.encode(h)))

    async def _problem(self, request: Request, exc: MemstrataError, send: Send) -> None:
        """The application's own answer to ``exc`` (its registered problem handler)."""
        handler = cast(
            Callable[[Request, Exception], Any], self.app.exception_handlers[MemstrataError]
        )
        response = handler(request, exc)
        if inspect.isawaitable(response):
            response = await response
        await response(request.scope, request.receive, send)


class LaneApp(FastAPI):
    """FastAPI with a :class:`HotLane` in front of its middleware stack (``lane`` None: off)."""

    lane: HotLane | None = None

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        lane = self.lane
        if lane is not None and lane.take(scope):
            await lane(scope, receive, send)
            return
        await super().__call__(scope, receive, send)
