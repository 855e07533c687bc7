"""The request body size limit, enforced before any handler reads the body.

A declared ``Content-Length`` over the limit is refused without reading; a
body without one (chunked) is counted as it streams and refused as soon as it
passes the limit. A body under the limit is buffered (at most the limit) and
replayed to the application.
"""

from __future__ import annotations

from starlette.types import ASGIApp, Message, Receive, Scope, Send

from memstrata.server.problems import problem

__all__ = ["BodyLimit"]


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
        declared = dict(scope["headers"]).get(b"content-length")
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
        replayed = False

        async def replay() -> Message:
            nonlocal replayed
            if not replayed:
                replayed = True
                return {"type": "http.request", "body": body, "more_body": False}
            return await receive()  # later calls wait for the disconnect, as usual

        await self.app(scope, replay, send)
