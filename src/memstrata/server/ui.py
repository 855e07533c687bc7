"""The web UI: a static, read-mostly inspector of one user's memory, served next to the API.

``/`` answers the page and ``/ui/...`` its scripts and styles, straight from the package
(no build step, nothing fetched from the network). The page talks to the same ``/v1``
API with the key the person signs in with, so it can see and do exactly what that key
can. Every other path keeps the API's problem+json answers.
"""

from __future__ import annotations

from pathlib import Path

from fastapi import FastAPI
from fastapi.responses import FileResponse
from starlette.staticfiles import StaticFiles
from starlette.types import Message, Receive, Scope, Send

__all__ = ["ASSETS", "mount_ui"]

ASSETS = Path(__file__).with_name("ui")

# The page loads only its own files and calls only its own origin; it is never framed.
_PAGE_HEADERS = {
    "Content-Security-Policy": (
        "default-src 'none'; script-src 'self'; style-src 'self'; img-src 'self' data:; "
        "connect-src 'self'; base-uri 'none'; form-action 'none'; frame-ancestors 'none'"
    ),
    "X-Content-Type-Options": "nosniff",
    "Referrer-Policy": "no-referrer",
    # A new release's page must not be served from a stale cache next to new scripts.
    "Cache-Control": "no-cache",
}

_ASSET_HEADERS = [(b"x-content-type-options", b"nosniff"), (b"cache-control", b"no-cache")]


class _Assets(StaticFiles):
    """Static files that are never sniffed into another type and are revalidated on use."""

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        async def send_with_headers(message: Message) -> None:
            if message["type"] == "http.response.start":
                message["headers"] = [*message.get("headers", []), *_ASSET_HEADERS]
            await send(message)

        await super().__call__(scope, receive, send_with_headers)


def mount_ui(app: FastAPI) -> None:
    """Serve the UI at ``/`` (the page) and ``/ui/`` (its files); neither is in the OpenAPI."""

    async def page() -> FileResponse:
        return FileResponse(ASSETS / "index.html", media_type="text/html", headers=_PAGE_HEADERS)

    app.add_api_route("/", page, methods=["GET"], include_in_schema=False)
    app.mount("/ui", _Assets(directory=ASSETS), name="ui")
