"""What the remote client sends and how it reads errors: pure functions, no I/O.

The server takes the scope from the API key, never from a body: a user key acts as
its own user, an admin key names the user (and agent) in headers. These functions
turn a :class:`~memstrata.types.Scope` into those headers, refusing a scope the key
cannot act as, so a call never silently runs as someone else. Problem responses
(RFC 9457) become the :mod:`memstrata.errors` class the embedded API would raise.
"""

from __future__ import annotations

import contextlib
import json
from collections.abc import Callable
from typing import Any
from urllib.parse import quote

from memstrata import errors
from memstrata.errors import Forbidden, MemstrataError
from memstrata.ids import new_id
from memstrata.instants import from_micros, parse_instant
from memstrata.types import FileRef, NewMessage, Scope
from memstrata.validation import checked_scope
from memstrata.wire.auth import Identity, MeOut

__all__ = [
    "AGENT_HEADER",
    "USER_HEADER",
    "Identity",
    "error_from_response",
    "file_json",
    "identity_from_dict",
    "iso_time",
    "message_json",
    "owner_headers",
    "scope_headers",
    "segment",
    "version_headers",
]

USER_HEADER = "X-Memstrata-User"
AGENT_HEADER = "X-Memstrata-Agent"


#: ``GET /v1/me`` read back.
identity_from_dict: Callable[[Any], Identity] = MeOut.decoder()


def check_tenant(me: Identity, tenant: str) -> None:
    if tenant != me.tenant:
        raise Forbidden(
            f"this API key belongs to tenant {me.tenant!r}, not {tenant!r}", field="tenant"
        )


def scope_headers(me: Identity, scope: Scope) -> dict[str, str]:
    """The headers that make the server act as ``scope``; Forbidden when the key cannot."""
    s = checked_scope(scope)
    check_tenant(me, s.tenant)
    if me.admin:
        headers = {USER_HEADER: s.user}
        if s.agent is not None:
            headers[AGENT_HEADER] = s.agent
        return headers
    if s.user != me.user:
        raise Forbidden(
            f"this API key acts as user {me.user!r} only, not {s.user!r}; "
            "use an admin key to act for other users",
            field="user",
        )
    if s.agent != me.agent:
        raise Forbidden(
            f"this API key cannot act as agent {s.agent!r}; use an admin key", field="agent"
        )
    return {}


def owner_headers(me: Identity, tenant: str | None, user: str | None) -> dict[str, str]:
    """Headers for the job routes: a tenant's jobs (admin key, no user) or one user's."""
    if tenant is not None:
        check_tenant(me, tenant)
    if user is None:
        return {}
    if me.admin:
        Scope(me.tenant, user)  # validates the name before it goes into a header
        return {USER_HEADER: user}
    if user != me.user:
        raise Forbidden(f"this API key sees the jobs of user {me.user!r} only", field="user")
    return {}


def version_headers(expected_version: int | None) -> dict[str, str]:
    """Compare-and-set as conditional headers: 0 means "must not exist yet"."""
    if expected_version is None:
        return {}
    if expected_version == 0:
        return {"If-None-Match": "*"}
    return {"If-Match": f'"{expected_version}"'}


def segment(value: str) -> str:
    """One path segment, escaped so a name cannot change the route it goes to."""
    return quote(value, safe="")


def message_json(new: NewMessage) -> dict[str, Any]:
    """The append body: fields the caller set (a left-out ``parent_id`` stays left out),
    with a client-made id when none was given, so a retried append is idempotent."""
    body = new.model_dump(mode="json", exclude_unset=True)
    if body.get("id") is None:
        body["id"] = new_id()
    return body


def file_json(f: FileRef | dict[str, Any]) -> dict[str, Any]:
    # Unset fields stay out, so the server applies the list's belongs_to default.
    return f.model_dump(mode="json", exclude_unset=True) if isinstance(f, FileRef) else dict(f)


_BY_CODE: dict[str, type[MemstrataError]] = {
    cls.code: cls
    for cls in (getattr(errors, name) for name in errors.__all__)
    if isinstance(cls, type) and issubclass(cls, MemstrataError)
}
_BY_STATUS: dict[int, type[MemstrataError]] = {
    400: errors.InvalidInput,
    401: errors.Unauthorized,
    403: errors.Forbidden,
    404: errors.NotFound,
    409: errors.Conflict,
    410: errors.Expired,
    412: errors.PreconditionFailed,
    413: errors.PayloadTooLarge,
    422: errors.InvalidInput,
    429: errors.RateLimited,
    502: errors.BackendUnavailable,
    503: errors.BackendUnavailable,
    504: errors.BackendUnavailable,
}


def _error_class(status: int, code: object) -> type[MemstrataError]:
    cls = _BY_CODE.get(code) if isinstance(code, str) else None
    if cls is not None and (cls.status == status or status not in _BY_STATUS):
        return cls
    # A subclass code this client does not know (or one at odds with the status): the status decides.
    return _BY_STATUS.get(status, cls or MemstrataError)


def error_from_response(
    status: int, content_type: str, body: bytes, retry_after: str | None = None
) -> MemstrataError:
    """The exception for an error response: by the problem's ``code``, else its status."""
    problem: dict[str, Any] = {}
    if "json" in content_type:
        try:
            parsed = json.loads(body)
        except (ValueError, UnicodeDecodeError):
            parsed = None
        if isinstance(parsed, dict):
            problem = parsed
    detail = problem.get("detail")
    if isinstance(detail, str) and detail:
        message = detail
    else:
        text = body[:200].decode("utf-8", "replace").strip()
        message = f"HTTP {status}" + (f": {text}" if text else "")
    code = problem.get("code")
    extra: dict[str, Any] = {"status": status}
    if isinstance(code, str):
        extra["code"] = code
    for key in ("field", "errors"):
        if key in problem:
            extra[key] = problem[key]
    if retry_after is not None:
        with contextlib.suppress(ValueError):  # an HTTP date: not worth parsing here
            extra["retry_after"] = float(retry_after)
    return _error_class(status, code)(message, **extra)


def iso_time(value: object, field: str) -> str | None:
    """An ``as_of``-like argument as the server reads it (ISO 8601, UTC); bad input is
    refused here as the embedded memory refuses it."""
    micros = parse_instant(value, field)
    return None if micros is None else from_micros(micros).isoformat()
