"""The one exception tree of memstrata.

Every error the library raises on purpose derives from :class:`MemstrataError`;
driver errors are translated at the backend boundary, so callers never need to
catch ``sqlite3`` or ``psycopg`` exceptions::

    MemstrataError
    ├── NotFound              (404) missing, or owned by another scope
    ├── Conflict              (409) idempotency mismatch, duplicate, illegal state
    ├── InvalidInput          (422) a value the caller sent is wrong
    │   └── PayloadTooLarge   (413) a body or field over its size limit
    ├── PreconditionFailed    (412) a compare-and-set lost (stale ETag)
    ├── Expired               (410) a checkpoint or key past its lifetime
    ├── RateLimited           (429)
    ├── Unauthorized          (401) missing or unknown key
    ├── Forbidden             (403) key lacks the right for this call
    ├── Corruption            (500) stored data fails a check
    ├── BackendUnavailable    (503) a database, cache or store cannot be reached
    ├── MissingDependency     (500) an optional extra is not installed
    └── ConfigurationError    (500) settings that cannot work together
"""

from __future__ import annotations

from typing import Any, ClassVar

__all__ = [
    "BackendUnavailable",
    "ConfigurationError",
    "Conflict",
    "Corruption",
    "Expired",
    "Forbidden",
    "InvalidInput",
    "MemstrataError",
    "MissingDependency",
    "NotFound",
    "PayloadTooLarge",
    "PreconditionFailed",
    "RateLimited",
    "Unauthorized",
]


class MemstrataError(Exception):
    """Root of every error memstrata raises on purpose.

    ``status`` is the HTTP status the REST surface answers with, ``code`` a
    stable machine-readable slug, ``detail`` extra structured context that is
    safe to show a client (never secrets).
    """

    status: ClassVar[int] = 500
    code: ClassVar[str] = "internal"

    def __init__(self, message: str, **detail: Any) -> None:
        super().__init__(message)
        self.message = message
        self.detail = detail


class NotFound(MemstrataError):
    """The thing does not exist, or belongs to another scope (never told apart)."""

    status = 404
    code = "not_found"


class Conflict(MemstrataError):
    """The write contradicts stored state (idempotency mismatch, duplicate, wrong state)."""

    status = 409
    code = "conflict"


class InvalidInput(MemstrataError):
    """A value the caller sent is invalid; ``detail['field']`` names it when known."""

    status = 422
    code = "invalid_input"


class PayloadTooLarge(InvalidInput):
    """A request body or a field is over its configured size limit."""

    status = 413
    code = "payload_too_large"


class PreconditionFailed(MemstrataError):
    """A compare-and-set write lost: the caller's version is stale."""

    status = 412
    code = "precondition_failed"


class Expired(MemstrataError):
    """The thing existed but its lifetime is over."""

    status = 410
    code = "expired"


class RateLimited(MemstrataError):
    """Too many requests; ``detail['retry_after']`` says when to come back (seconds)."""

    status = 429
    code = "rate_limited"


class Unauthorized(MemstrataError):
    """No credentials, or credentials that match no live key."""

    status = 401
    code = "unauthorized"


class Forbidden(MemstrataError):
    """The credentials are valid but do not allow this call."""

    status = 403
    code = "forbidden"


class Corruption(MemstrataError):
    """Stored data failed an integrity check."""

    status = 500
    code = "corruption"


class BackendUnavailable(MemstrataError):
    """A backend (database, cache, object store) cannot be reached right now."""

    status = 503
    code = "backend_unavailable"


class MissingDependency(MemstrataError, ImportError):
    """An optional extra is needed; the message names the ``pip install`` to run."""

    status = 500
    code = "missing_dependency"


class ConfigurationError(MemstrataError):
    """Settings are missing or contradict each other."""

    status = 500
    code = "configuration_error"
