"""A circuit breaker for a database connection (no I/O: the engine connects, this decides).

While the database is known to be unreachable, waiting for a connection only makes every
request slow to fail. After a connection failure the breaker is *open*: calls fail at
once, except one probe every ``retry_s`` (the first caller after that moment connects
directly, with a short timeout). A probe that connects closes the breaker and tells the
engine to start fresh pools, whose reconnect backoff may have grown long during the outage,
so service is back as soon as the database is.
"""

from __future__ import annotations

import threading
import time
from collections.abc import Callable

__all__ = ["Breaker"]


class Breaker:
    """Open after a connection failure; one probe at a time is let through while open."""

    def __init__(self, retry_s: float = 0.25, clock: Callable[[], float] = time.monotonic) -> None:
        self._retry_s = retry_s
        self._clock = clock
        self._lock = threading.Lock()
        self._open = False
        self._next_probe = 0.0
        self._probing = False

    @property
    def is_open(self) -> bool:
        return self._open

    def admit(self) -> str:
        """``"closed"``: go ahead; ``"probe"``: the breaker is open and this caller probes
        (it must report :meth:`succeeded` or :meth:`failed`); ``"open"``: fail fast."""
        with self._lock:
            if not self._open:
                return "closed"
            if self._probing or self._clock() < self._next_probe:
                return "open"
            self._probing = True
            return "probe"

    def failed(self) -> None:
        """A connection failed: open (or stay open) until the next probe is due."""
        with self._lock:
            self._open = True
            self._probing = False
            self._next_probe = self._clock() + self._retry_s

    def succeeded(self) -> bool:
        """A connection worked: close. True when it was open (the engine resets its pools)."""
        with self._lock:
            was_open = self._open
            self._open = False
            self._probing = False
            return was_open
