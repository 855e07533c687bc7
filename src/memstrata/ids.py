"""Time-ordered identifiers (UUIDv7, RFC 9562) and the legacy all-zero parent."""

from __future__ import annotations

import os
import re
import threading
import time
import uuid

from memstrata.errors import InvalidInput

__all__ = ["UUID_NIL", "new_id", "parse_id"]

#: Dify's "no branch information" parent: the message follows the previous one by ``seq``.
UUID_NIL = "00000000-0000-0000-0000-000000000000"

_lock = threading.Lock()
_last_ms = 0
_counter = 0


def new_id() -> str:
    """Return a new UUIDv7 string, strictly increasing within this process.

    The 12-bit ``rand_a`` field holds a counter seeded randomly each millisecond
    (RFC 9562 method 1), so ids made in the same millisecond still sort in
    creation order.
    """
    global _last_ms, _counter
    with _lock:
        ms = time.time_ns() // 1_000_000
        if ms > _last_ms:
            _last_ms = ms
            _counter = int.from_bytes(os.urandom(2), "big") & 0x7FF
        else:
            _counter += 1
            if _counter > 0xFFF:  # counter exhausted: borrow the next millisecond
                _last_ms += 1
                _counter = 0
            ms = _last_ms
        rand_b = int.from_bytes(os.urandom(8), "big") & ((1 << 62) - 1)
    value = (ms & ((1 << 48) - 1)) << 80
    value |= 0x7 << 76
    value |= _counter << 64
    value |= 0b10 << 62
    value |= rand_b
    h = f"{value:032x}"  # str(uuid.UUID(int=value)), without the object
    return f"{h[:8]}-{h[8:12]}-{h[12:16]}-{h[16:20]}-{h[20:]}"


#: An id already in its canonical form (what the store hands out): nothing to convert.
_CANONICAL = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


def parse_id(value: str, *, field: str = "id") -> str:
    """Validate a client-supplied id and return its canonical lowercase form."""
    if type(value) is str and _CANONICAL.fullmatch(value):
        return value  # what uuid.UUID would give back, at a tenth of the cost
    try:
        return str(uuid.UUID(value))
    except (ValueError, AttributeError, TypeError):
        raise InvalidInput(f"{field} must be a UUID, got {value!r}", field=field) from None
