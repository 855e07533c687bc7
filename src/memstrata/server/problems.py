"""RFC 9457 problem details: every error the server sends is ``application/problem+json``.

One place turns exceptions into problems, so a client parses one error shape
whatever went wrong: a memstrata error, a validation error, an unknown route, a
wrong method, or a bug (which answers 500 and never shows internals).
"""

from __future__ import annotations

import logging
from http import HTTPStatus
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from pydantic import BaseModel, ConfigDict
from starlette.exceptions import HTTPException as StarletteHTTPException

from memstrata.disclosure import client_message
from memstrata.errors import MemstrataError
from memstrata.server.responses import JSONResponse

__all__ = ["PROBLEM_JSON", "Problem", "install_problem_handlers", "printable", "problem"]

PROBLEM_JSON = "application/problem+json"

log = logging.getLogger("memstrata.server")

# Names a problem body already uses; error detail never overrides them.
_RESERVED = {"type", "title", "status", "detail", "code", "instance"}


class Problem(BaseModel):
    """The body of every error response (documentation model)."""

    model_config = ConfigDict(extra="allow")

    type: str
    title: str
    status: int
    detail: str
    code: str


def printable(path: str) -> str:
    """A request path fit for one log line: control characters (a decoded ``%0A``) escaped."""
    return path if path.isprintable() else path.encode("unicode_escape").decode("ascii")


def _slug(status: int) -> str:
    try:
        return HTTPStatus(status).phrase.lower().replace(" ", "_").replace("-", "_")
    except ValueError:
        return "error"


def problem(
    status: int,
    code: str,
    detail: str,
    *,
    headers: dict[str, str] | None = None,
    **extra: Any,
) -> JSONResponse:
    """A problem response; ``code`` is the stable slug clients switch on."""
    body: dict[str, Any] = {
        "type": f"urn:memstrata:problem:{code}",
        "title": code.replace("_", " ").capitalize(),
        "status": status,
        "detail": detail,
        "code": code,
    }
    body.update({k: v for k, v in extra.items() if k not in _RESERVED})
    return JSONResponse(body, status_code=status, headers=headers, media_type=PROBLEM_JSON)


def _clean_errors(errors: Any) -> list[dict[str, Any]]:
    """Validation errors reduced to what is safe and JSON-ready (no inputs, no exception objects)."""
    out: list[dict[str, Any]] = []
    if not isinstance(errors, list | tuple):
        return out
    for err in errors:
        if isinstance(err, dict):
            out.append(
                {
                    "loc": [p if isinstance(p, int) else str(p) for p in err.get("loc", ())],
                    "msg": str(err.get("msg", "")),
                    "type": str(err.get("type", "")),
                }
            )
    return out


def _memstrata_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, MemstrataError)
    headers: dict[str, str] = {}
    if exc.status == 401:
        headers["WWW-Authenticate"] = "Bearer"
    if exc.status >= 500:
        # Server-side failures are logged in full and answered without internals.
        log.error(
            "%s %s failed: %s: %s",
            request.method,
            printable(request.url.path),
            exc.code,
            exc.message,
        )
        detail = (
            "a backend is unavailable; try again later"
            if exc.status == 503
            else "internal server error"
        )
        return problem(exc.status, exc.code, detail, headers=headers or None)
    message = client_message(exc)
    if message != exc.message:  # the driver's words go to the log only
        log.info(
            "%s %s: %s: %s", request.method, printable(request.url.path), exc.code, exc.message
        )
    extra: dict[str, Any] = {}
    if isinstance(exc.detail.get("field"), str):
        extra["field"] = exc.detail["field"]
    if "errors" in exc.detail:
        extra["errors"] = _clean_errors(exc.detail["errors"])
    retry = exc.detail.get("retry_after")
    if isinstance(retry, int | float):
        headers["Retry-After"] = str(int(retry))
    return problem(exc.status, exc.code, message, headers=headers or None, **extra)


def _validation_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, RequestValidationError)
    errors = _clean_errors(list(exc.errors()))
    if any(e["type"] == "json_invalid" for e in errors):
        detail = "the request body is not valid JSON"
    elif errors:
        first = errors[0]
        where = ".".join(str(p) for p in first["loc"])
        detail = f"{where}: {first['msg']}" if where else first["msg"]
    else:
        detail = "invalid request"
    return problem(422, "invalid_input", detail, errors=errors)


def _http_error(request: Request, exc: Exception) -> JSONResponse:
    assert isinstance(exc, StarletteHTTPException)
    status = exc.status_code
    if status == 400:
        # FastAPI's "error parsing the body": a body problem, which the table answers 422.
        return problem(422, "invalid_input", "the request body could not be read")
    phrase = HTTPStatus(status).phrase if status in HTTPStatus._value2member_map_ else "Error"
    if status == 404:
        detail = f"no route {request.url.path}"
    elif status == 405:
        detail = f"method {request.method} is not allowed on {request.url.path}"
    else:
        detail = exc.detail if isinstance(exc.detail, str) and exc.detail else phrase
    return problem(status, _slug(status), detail, headers=dict(exc.headers or {}) or None)


def _unexpected(request: Request, exc: Exception) -> JSONResponse:
    log.exception("%s %s raised", request.method, printable(request.url.path), exc_info=exc)
    return problem(500, "internal", "internal server error")


def install_problem_handlers(app: FastAPI) -> None:
    app.add_exception_handler(MemstrataError, _memstrata_error)
    app.add_exception_handler(RequestValidationError, _validation_error)
    app.add_exception_handler(StarletteHTTPException, _http_error)
    app.add_exception_handler(Exception, _unexpected)
