"""When the remote client retries a request, and the pause between tries.

A request that failed to connect never reached the server, so any request may be
sent again. A request that failed later (the connection dropped mid-exchange) may
have been applied: only reads and appends carrying their own message id are sent
again. Timeouts are not retried; the caller chose how long to wait.

The pause has an async and a sync form (:class:`AsyncBackoff`, :class:`Backoff`)
because the remote facade's sync module is generated from its async one.
"""

from __future__ import annotations

import time

import anyio
import httpx

__all__ = ["ATTEMPTS", "AsyncBackoff", "Backoff", "delay", "retryable"]

#: Tries in all, the first included.
ATTEMPTS = 3

_NOT_SENT = (httpx.ConnectError, httpx.ConnectTimeout)
_DROPPED = (httpx.ReadError, httpx.WriteError, httpx.RemoteProtocolError)


def retryable(exc: httpx.TransportError, attempt: int, idempotent: bool) -> bool:
    """Whether try number ``attempt`` (0-based) that raised ``exc`` is worth another."""
    if attempt + 1 >= ATTEMPTS:
        return False
    if isinstance(exc, _NOT_SENT):
        return True
    return idempotent and isinstance(exc, _DROPPED)


def delay(attempt: int) -> float:
    """Seconds before the next try: short, growing (0.1, 0.4)."""
    return 0.1 * 4.0**attempt


class AsyncBackoff:
    async def wait(self, attempt: int) -> None:
        await anyio.sleep(delay(attempt))


class Backoff:
    def wait(self, attempt: int) -> None:
        time.sleep(delay(attempt))
