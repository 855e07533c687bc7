"""Request ids and structured (JSON) logs.

A request id names one unit of work from the edge to the background: the server
takes it from ``X-Request-Id`` (or makes one), binds it for the request, returns
it in the response header, stores it on every job the request queues, and the
worker binds it again while that job runs. Every log record carries the id bound
at the time, so one grep follows a request into its jobs.
"""

from __future__ import annotations

import asyncio
import contextlib
import json
import logging
import re
import sys
import time
from collections.abc import Callable, Iterable, Iterator
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
    "log_direct",
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


def _fields(
    created: float,
    level: str,
    logger: str,
    message: str,
    request_id: str | None,
    extra: Iterable[tuple[str, Any]],
) -> dict[str, Any]:
    """A line's object: time, level, logger, message, request id, then the extras."""
    out: dict[str, Any] = {
        "time": _utc_millis(created),
        "level": level.lower(),
        "logger": logger,
        "message": message,
    }
    rid = request_id or current_request_id()
    if rid is not None:
        out["request_id"] = rid
    for key, value in extra:
        if key not in out:
            out[key] = value
    return out


class JsonFormatter(logging.Formatter):
    """One JSON object per line: time, level, logger, message, request id, extras."""

    def format(self, record: logging.LogRecord) -> str:
        extra = ((k, v) for k, v in record.__dict__.items() if k not in _STANDARD and k[:1] != "_")
        out = _fields(
            record.created,
            record.levelname,
            record.name,
            record.getMessage(),
            getattr(record, "request_id", None),
            extra,
        )
        if record.exc_info:
            out["exception"] = self.formatException(record.exc_info)
        return _dumps(out)


def _sole_json_handler(logger: logging.Logger, level: int) -> logging.StreamHandler[Any] | None:
    """The one handler a record of ``logger`` at ``level`` would reach, when that is a plain
    stream handler with this module's formatter and nothing (a filter, another handler)
    would see the record on the way; else None."""
    if logger.disabled or logger.filters:
        return None
    found: list[logging.Handler] = []
    node: logging.Logger | None = logger
    while node is not None:
        found += node.handlers
        node = node.parent if node.propagate else None
    if len(found) != 1:
        return None  # none (logging's last resort) or several
    handler = found[0]
    if (
        not isinstance(handler, logging.StreamHandler)
        or type(handler).emit is not logging.StreamHandler.emit
        or type(handler.formatter) is not JsonFormatter
        or handler.filters
        or level < handler.level
    ):
        return None
    return handler


def log_direct(logger: logging.Logger, level: int, message: str, extra: dict[str, Any]) -> None:
    """``logger.log(level, message, extra=extra)``, cheaper where :func:`configure_logging`
    set the handlers up (the line every served request writes): the same JSON line is
    written straight to the stream, without a ``LogRecord``, and on an event loop the lines
    of one turn are flushed together at the start of the next (one write instead of one per
    line). Any other set-up (another handler or formatter, a filter) gets the record the
    usual way."""
    if not logger.isEnabledFor(level):
        return
    handler = _sole_json_handler(logger, level)
    if handler is None:
        logger.log(level, "%s", message, extra=extra, stacklevel=2)
        return
    name = logging.getLevelName(level)
    line = _dumps(
        _fields(time.time(), name, logger.name, message, extra.get("request_id"), extra.items())
    )
    try:
        with handler.lock or contextlib.nullcontext():
            handler.stream.write(line + handler.terminator)
            if not _flush_next_turn(handler):
                handler.flush()
    except Exception:  # as the handler's own emit: reported, never raised into the caller
        record = logger.makeRecord(logger.name, level, "", 0, "%s", (message,), None, extra=extra)
        handler.handleError(record)


#: Handlers written to in this turn of a running event loop, and the loop that flushes
#: each on its next turn.
_unflushed: dict[logging.Handler, asyncio.AbstractEventLoop] = {}


def _flush_next_turn(handler: logging.Handler) -> bool:
    """Have the running event loop flush ``handler`` on its next turn, once however many
    lines this turn writes (any other record the handler emits meanwhile flushes them
    first, in order); False off an event loop, where the caller flushes now."""
    try:
        loop = asyncio.get_running_loop()
    except RuntimeError:
        return False
    # Another loop's flush (one that ended before its next turn) does not count for this one.
    if _unflushed.get(handler) is not loop:
        _unflushed[handler] = loop
        loop.call_soon(_flush, handler)
    return True


def _flush(handler: logging.Handler) -> None:
    _unflushed.pop(handler, None)
    try:
        with handler.lock or contextlib.nullcontext():
            handler.flush()
    except Exception:
        handler.handleError(logging.makeLogRecord({"msg": "flushing the log stream"}))


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
