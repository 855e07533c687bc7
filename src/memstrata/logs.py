"""Request ids and structured (JSON) logs.

A request id names one unit of work from the edge to the background: the server
takes it from ``X-Request-Id`` (or makes one), binds it for the request, returns
it in the response header, stores it on every job the request queues, and the
worker binds it again while that job runs. Every log record carries the id bound
at the time, so one grep follows a request into its jobs.
"""

from __future__ import annotations

import json
import logging
import re
import sys
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from datetime import UTC, datetime
from typing import Any

from memstrata.ids import new_id

__all__ = [
    "JsonFormatter",
    "bound_request_id",
    "configure_logging",
    "current_request_id",
    "valid_request_id",
]

_native_dumps: Callable[..., bytes] | None
try:  # the server extra's encoder: every request writes an access line, encoded natively
    from orjson import dumps as _native_dumps
except ImportError:  # pragma: no cover - the server extra installs it
    _native_dumps = None

_request_id: ContextVar[str | None] = ContextVar("memstrata_request_id", default=None)
_VALID = re.compile(r"^[A-Za-z0-9._:@+\-]{1,128}$")
# Fields every LogRecord has; anything else a caller passed in ``extra`` is logged too.
_STANDARD = set(logging.LogRecord("", 0, "", 0, "", None, None).__dict__) | {"message", "asctime"}


def current_request_id() -> str | None:
    return _request_id.get()


def valid_request_id(value: str | None) -> str:
    """The caller's id when it is safe to log and echo, else a fresh one."""
    if value is not None and _VALID.fullmatch(value):
        return value
    return new_id()


@contextmanager
def bound_request_id(value: str | None) -> Iterator[None]:
    token = _request_id.set(value)
    try:
        yield
    finally:
        _request_id.reset(token)


#: The last whole second formatted, and its text (every served request logs a line: the
#: date and time are formatted once a second, the milliseconds per line).
_second: tuple[int, str] = (-1, "")


def _utc_millis(created: float) -> str:
    """``datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")``."""
    global _second
    whole = int(created)
    micros = round((created - whole) * 1e6)  # rounded as datetime rounds (half to even)
    if micros >= 1_000_000:
        whole, micros = whole + 1, micros - 1_000_000
    second, text = _second
    if whole != second:
        text = datetime.fromtimestamp(whole, UTC).strftime("%Y-%m-%dT%H:%M:%S")
        _second = (whole, text)
    return f"{text}.{micros // 1000:03d}+00:00"


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request id, extras."""

    def format(self, record: logging.LogRecord) -> str:
        out: dict[str, Any] = {
            "time": _utc_millis(record.created),
            "level": record.levelname.lower(),
            "logger": record.name,
            "message": record.getMessage(),
        }
        rid = getattr(record, "request_id", None) or current_request_id()
        if rid is not None:
            out["request_id"] = rid
        for key, value in record.__dict__.items():
            if key not in _STANDARD and key not in out and not key.startswith("_"):
                out[key] = value
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return _dumps(out)


def _dumps(out: dict[str, Any]) -> str:
    """One JSON line: orjson where installed (every served request writes one; docs/benchmarks.md,
    "The access line through orjson"), the standard encoder otherwise and for what orjson
    refuses (an integer over 64 bits)."""
    if _native_dumps is not None:
        try:
            return _native_dumps(out, default=str).decode()
        except TypeError:  # orjson.JSONEncodeError is one
            pass
    return json.dumps(out, default=str, ensure_ascii=False)


def configure_logging(*, json_logs: bool = True, level: str = "INFO") -> None:
    """Send memstrata's logs (and the server's) to stderr, as JSON lines or plain text."""
    handler = logging.StreamHandler(sys.stderr)
    if json_logs:
        handler.setFormatter(JsonFormatter())
    else:
        handler.setFormatter(logging.Formatter("%(asctime)s %(levelname)s %(name)s %(message)s"))
    for name in ("memstrata", "uvicorn.error"):
        logger = logging.getLogger(name)
        logger.handlers[:] = [handler]
        logger.setLevel(level.upper())
        logger.propagate = False
