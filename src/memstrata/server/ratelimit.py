"""Per-key rate limits (a token bucket per API key), and failed-authentication limits
(a bucket per client address).

Each key may make ``rate`` requests per second on average, and ``burst`` at once.
On the embedded default the buckets live in the process; with Redis configured
they live in Redis (one small hash per key, updated by one atomic script), so every
replica behind a load balancer draws from the same bucket. A request over the
limit is answered 429 with ``Retry-After``.

Failed authentications (an unknown or revoked key) draw from a bucket of the client's
address, in the process (:class:`AuthFailures`): once it is empty, every request from that
address is answered 429 before its key is looked up, so guessing keys costs the store
nothing and gains one guess per refill. A key that authenticates takes nothing from it.
"""

from __future__ import annotations

import math
import threading
import time
from collections import OrderedDict
from typing import Any, Protocol

from memstrata.config import Settings
from memstrata.errors import BackendUnavailable, RateLimited

__all__ = [
    "AuthFailures",
    "LocalBuckets",
    "RateLimiter",
    "RedisBuckets",
    "auth_failures",
    "check",
    "rate_limiter",
]


class RateLimiter(Protocol):
    def take(self, key: str) -> float:
        """Take one token for ``key``: 0.0 when granted, else seconds until one is free."""
        ...


class LocalBuckets:
    """In-process buckets (bounded: the least recently used keys are forgotten)."""

    def __init__(self, rate: float, burst: int, *, max_keys: int = 100_000) -> None:
        self.rate = rate
        self.burst = burst
        self._max = max_keys
        self._buckets: OrderedDict[str, tuple[float, float]] = OrderedDict()
        self._lock = threading.Lock()

    def take(self, key: str, now: float | None = None) -> float:
        t = time.monotonic() if now is None else now
        with self._lock:
            tokens, last = self._buckets.pop(key, (float(self.burst), t))
            tokens = min(float(self.burst), tokens + (t - last) * self.rate)
            wait = 0.0
            if tokens >= 1.0:
                tokens -= 1.0
            else:
                wait = (1.0 - tokens) / self.rate
            self._buckets[key] = (tokens, t)
            if len(self._buckets) > self._max:
                self._buckets.popitem(last=False)
            return wait

    def wait(self, key: str, now: float | None = None) -> float:
        """Seconds until ``key`` has a token, without taking one (0.0: it has one now)."""
        t = time.monotonic() if now is None else now
        with self._lock:
            found = self._buckets.get(key)
        if found is None:
            return 0.0
        tokens = min(float(self.burst), found[0] + (t - found[1]) * self.rate)
        return 0.0 if tokens >= 1.0 else (1.0 - tokens) / self.rate


# KEYS[1] the bucket; ARGV rate, burst, now (s). Returns the wait in ms (0: granted).
_SCRIPT = """
local b = redis.call('HMGET', KEYS[1], 't', 'ts')
local rate, burst, now = tonumber(ARGV[1]), tonumber(ARGV[2]), tonumber(ARGV[3])
local tokens = tonumber(b[1]) or burst
local ts = tonumber(b[2]) or now
tokens = math.min(burst, tokens + math.max(0, now - ts) * rate)
local wait = 0
if tokens >= 1 then tokens = tokens - 1 else wait = math.ceil((1 - tokens) / rate * 1000) end
redis.call('HSET', KEYS[1], 't', tokens, 'ts', now)
redis.call('PEXPIRE', KEYS[1], math.ceil(burst / rate * 1000) + 1000)
return wait
"""


class RedisBuckets:
    """Buckets shared by every replica, in Redis (the server's clock stamps each take)."""

    def __init__(self, client: Any, rate: float, burst: int, prefix: str = "memstrata:rl:") -> None:
        self.rate = rate
        self.burst = burst
        self._prefix = prefix
        self._script = client.register_script(_SCRIPT)

    def take(self, key: str) -> float:
        try:
            ms = self._script(keys=[self._prefix + key], args=[self.rate, self.burst, time.time()])
        except Exception as exc:  # the driver's errors, translated at the boundary
            raise BackendUnavailable(f"rate limiter: redis failed: {exc}") from exc
        return int(ms) / 1000.0


def check(limiter: RateLimiter | None, key: str) -> None:
    """Raise :class:`RateLimited` (429, Retry-After) when ``key`` is over its limit."""
    if limiter is None:
        return
    wait = limiter.take(key)
    if wait > 0:
        raise RateLimited(
            f"rate limit exceeded; retry in {wait:.2f} s", retry_after=max(1, math.ceil(wait))
        )


def rate_limiter(settings: Settings, redis_url: str | None) -> RateLimiter | None:
    """The limiter the settings ask for: none, in-process, or shared through Redis."""
    if settings.rate_limit_per_second <= 0:
        return None
    rate, burst = settings.rate_limit_per_second, settings.rate_limit_burst
    if redis_url is None:
        return LocalBuckets(rate, burst)
    from memstrata.backends import redis as redis_backend

    return RedisBuckets(redis_backend.connect(redis_url), rate, burst)


class AuthFailures:
    """Failed authentications per client address (see the module's docstring)."""

    def __init__(self, rate: float, burst: int) -> None:
        self._buckets = LocalBuckets(rate, burst, max_keys=10_000)

    def check(self, address: str) -> None:
        """Raise :class:`RateLimited` while ``address`` has used up its failures."""
        wait = self._buckets.wait(address)
        if wait > 0:
            raise RateLimited(
                f"too many failed authentications from this address; retry in {wait:.0f} s",
                retry_after=max(1, math.ceil(wait)),
            )

    def failed(self, address: str) -> None:
        self._buckets.take(address)


def auth_failures(settings: Settings) -> AuthFailures | None:
    if settings.auth_failure_rate_per_second <= 0:
        return None
    return AuthFailures(settings.auth_failure_rate_per_second, settings.auth_failure_burst)
