"""The request body limits, enforced before any handler reads the body.

A declared ``Content-Length`` over the limit is refused without reading; a
body without one (chunked) is counted as it streams and refused as soon as it
passes the limit. A body under the limit is buffered (at most the limit) and
replayed to the application.

A JSON body (any ``application/json`` or ``+json`` type, or no type at all, which
FastAPI reads as JSON) is decoded once here by :func:`memstrata.strictjson.loads`: a
body with ``NaN``/``Infinity``, a lone surrogate, nesting deeper than
:data:`~memstrata.strictjson.MAX_DEPTH` or malformed JSON is answered 422 before any
route runs, so no route can store such a value (REST and ``/mcp`` alike).
"""

from __future__ import annotations

from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memstrata.errors import InvalidInput
from memstrata.server.problems import problem
from memstrata.strictjson import loads

__all__ = ["BodyLimit", "is_json", "parsed_json"]

# Where the decoded body waits for a route that reads the body raw (an ASGI scope extension
# key), so such a route does not decode it a second time.
_PARSED = "memstrata.json"
_ABSENT = object()


def is_json(content_type: bytes | None) -> bool:
    """Whether FastAPI (or the MCP SDK) would read a body of this type as JSON."""
    if not content_type:
        return True
    media = content_type.split(b";", 1)[0].strip().lower()
    return media == b"application/json" or (
        media.startswith(b"application/") and media.endswith(b"+json")
    )


def parsed_json(scope: Scope) -> tuple[bool, Any]:
    """``(True, value)`` when :class:`BodyLimit` already decoded this request's JSON body."""
    value = scope.get(_PARSED, _ABSENT)
    return (False, None) if value is _ABSENT else (True, value)


class BodyLimit:
    def __init__(self, app: ASGIApp, max_bytes: int) -> None:
        self.app = app
        self.max_bytes = max_bytes

    async def _refuse(self, scope: Scope, receive: Receive, send: Send) -> None:
        response = problem(
            413,
            "payload_too_large",
            f"the request body is over the limit of {self.max_bytes} bytes",
            headers={"Connection": "close"},
        )
        await response(scope, receive, send)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        headers = dict(scope["headers"])
        declared = headers.get(b"content-length")
        if declared is not None:
            try:
                length = int(declared)
            except ValueError:
                await problem(400, "bad_request", "Content-Length is not a number")(
                    scope, receive, send
                )
                return
            if length > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
        chunks: list[bytes] = []
        total = 0
        while True:
            message = await receive()
            if message["type"] != "http.request":
                return  # the client went away before sending its body
            chunk: bytes = message.get("body", b"")
            total += len(chunk)
            if total > self.max_bytes:
                await self._refuse(scope, receive, send)
                return
            chunks.append(chunk)
            if not message.get("more_body", False):
                break
        body = b"".join(chunks)
        if body and is_json(headers.get(b"content-type")):
            try:
                scope[_PARSED] = loads(body)
            except InvalidInput as exc:
                await problem(422, exc.code, exc.message)(scope, receive, send)
                return
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # later calls wait for the disconnect, as usual

        await self.app(scope, replay, send)
