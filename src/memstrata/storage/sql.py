"""Small SQL helpers every feature's operations share: batch size, placeholders, the
clock in microseconds and opaque page cursors.

Operations are written with ``?`` placeholders; each engine rewrites them for its driver.
"""

from __future__ import annotations

import base64
import binascii
import time

from memstrata.errors import InvalidInput

# Ids per ``IN (...)`` list: below SQLite's default variable limit, and one round trip
# per 500 rows on PostgreSQL.
BATCH = 500


def placeholders(n: int) -> str:
    """``?, ?, ?`` for an ``IN`` list of ``n`` values."""
    return ", ".join("?" * n)


def now_micros() -> int:
    """Wall-clock time in integer microseconds, the unit every timestamp column stores."""
    return time.time_ns() // 1000


def encode_cursor(value: int | str) -> str:
    return base64.urlsafe_b64encode(str(value).encode()).decode().rstrip("=")


def decode_cursor(cursor: str | None) -> str | None:
    """The value inside an opaque cursor; a cursor we did not issue is invalid input."""
    if not cursor:
        return None
    try:
        padded = (cursor + "=" * (-len(cursor) % 4)).encode()
        value = base64.b64decode(padded, altchars=b"-_", validate=True).decode()
    except (ValueError, binascii.Error, UnicodeDecodeError):
        value = ""
    if not value or "\x00" in value:  # PostgreSQL cannot compare against a NUL
        raise InvalidInput("cursor is not one this server issued", field="cursor")
    return value


def seq_cursor(cursor: str | None) -> int | None:
    """The server order inside a cursor: a decimal that fits a 64-bit column (anything
    else would reach the driver, whose message must not reach the client)."""
    value = decode_cursor(cursor)
    if value is None:
        return None
    if not (value.isascii() and value.isdigit() and len(value) <= 19 and int(value) < 2**63):
        raise InvalidInput("cursor is not one this server issued", field="cursor")
    return int(value)
