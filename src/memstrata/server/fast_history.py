"""The history GET without FastAPI's per-request dependency solving (the hot read).

``GET /v1/conversations/{cid}/history`` stays declared as a FastAPI route, so the OpenAPI
document, and every answer that is not the plain case, are that route's. A plain Starlette
route in front of it answers the plain case itself: a bearer key, no admin headers, and
only ``leaf_id``, ``max_tokens`` (digits) and ``max_messages`` (the declared pattern), each
once. It authenticates and scopes with the same functions as the dependencies
(:mod:`memstrata.server.auth`), calls the same method and encodes the same wire model;
errors go to the same problem handlers. Anything else (a missing or malformed key
header, other parameters, a value FastAPI would refuse) is handed to the FastAPI route
untouched, so its validation and problem bodies stay exactly FastAPI's.
"""

from __future__ import annotations

import re
from typing import cast

from fastapi import FastAPI
from starlette.requests import Request
from starlette.routing import Match, Route
from starlette.types import Receive, Scope, Send

from memstrata.api import AsyncMemory
from memstrata.server.auth import AGENT_HEADER, USER_HEADER, authenticate, scope_of
from memstrata.server.history_params import message_cap
from memstrata.server.responses import JSONResponse
from memstrata.wire.conversations import HistoryOut

__all__ = ["HISTORY_PATH", "mount_fast_history"]

HISTORY_PATH = "/v1/conversations/{cid}/history"
_DIGITS = re.compile(r"[0-9]{1,12}")
_CAP = re.compile(r"[1-9][0-9]{0,12}|none")  # MaxMessages' pattern, anchored
_ADMIN_HEADERS = (USER_HEADER.lower().encode(), AGENT_HEADER.lower().encode())


def _plain(request: Request) -> tuple[str, dict[str, str]] | None:
    """The bearer secret and the query of a plain request, else None."""
    scheme, _, secret = request.headers.get("authorization", "").partition(" ")
    if scheme.lower() != "bearer" or not secret:
        return None
    if any(name in _ADMIN_HEADERS for name, _ in request.scope["headers"]):
        return None
    items = request.query_params.multi_items()
    query = dict(items)
    if len(query) != len(items) or not query.keys() <= {"leaf_id", "max_tokens", "max_messages"}:
        return None
    if "max_tokens" in query and not _DIGITS.fullmatch(query["max_tokens"]):
        return None
    if "max_messages" in query and not _CAP.fullmatch(query["max_messages"]):
        return None
    return secret, query


#: Set in a request's scope when the plain route hands it on: routing then skips it.
_HANDED_ON = "memstrata.history.handed_on"


async def _answer(scope: Scope, receive: Receive, send: Send) -> None:
    request = Request(scope, receive)
    plain = _plain(request)
    if plain is None:  # route it again, past this route, to the declared one
        scope[_HANDED_ON] = True
        await scope["app"].router(scope, receive, send)
        return
    secret, query = plain
    mem = cast(AsyncMemory, request.app.state.memory)
    caller = await authenticate(request, mem, secret)
    h = await mem.history(
        scope_of(caller, None, None),
        request.path_params["cid"],
        leaf_id=query.get("leaf_id"),
        max_tokens=int(query.get("max_tokens", "2000")),
        max_messages=message_cap(query.get("max_messages", "500")),
    )
    await JSONResponse(HistoryOut.encode(h))(scope, receive, send)


class _App:
    """An ASGI app (a plain function would be taken for a request handler by ``Route``)."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        await _answer(scope, receive, send)


class _FastHistoryRoute(Route):
    def matches(self, scope: Scope) -> tuple[Match, Scope]:
        if scope.get(_HANDED_ON):
            return Match.NONE, {}
        match, child = super().matches(scope)
        if match is not Match.NONE:
            child["route"] = self  # the access log and metrics name the route template
        return match, child


def mount_fast_history(app: FastAPI) -> None:
    """Put the plain route in front of the declared history route."""
    fast = _FastHistoryRoute(HISTORY_PATH, _App(), methods=["GET"])
    fast.methods = {"GET"}  # as declared: Starlette would add HEAD
    app.router.routes.insert(0, fast)
