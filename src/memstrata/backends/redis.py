"""Redis: a distributed lock and job wake-ups (both optional; PostgreSQL and polling serve without)."""

from __future__ import annotations

import contextlib
import logging
import secrets
import threading
import time
from typing import Any

from memstrata.errors import BackendUnavailable, MissingDependency

try:
    import redis
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependency('Redis needs the redis extra: pip install "memstrata[redis]"') from exc

__all__ = ["RedisLock", "RedisWakeup", "connect", "ping"]

log = logging.getLogger(__name__)

_RELEASE = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('del', KEYS[1]) else return 0 end
"""
_EXTEND = """
if redis.call('get', KEYS[1]) == ARGV[1] then return redis.call('pexpire', KEYS[1], ARGV[2]) else return 0 end
"""


def ping(client: redis.Redis) -> None:
    try:
        client.ping()
    except redis.RedisError as exc:
        log.warning("Redis ping failed: %s", exc)
        raise BackendUnavailable(f"Redis is unavailable ({type(exc).__name__})") from None


def connect(url: str) -> redis.Redis:
    client = redis.Redis.from_url(url, socket_connect_timeout=5, socket_timeout=10)
    try:
        client.ping()
    except redis.RedisError as exc:
        host = client.connection_pool.connection_kwargs.get("host", "?")
        port = client.connection_pool.connection_kwargs.get("port", "?")
        raise BackendUnavailable(
            f"Redis at {host}:{port} is unavailable: {exc}", where=f"{host}:{port}"
        ) from None
    return client


class RedisLock:
    """``SET NX PX`` with an owner token; release and extend only by the owner (Lua)."""

    def __init__(self, client: redis.Redis, prefix: str = "memstrata:lock:") -> None:
        self._r = client
        self._prefix = prefix
        self._release = client.register_script(_RELEASE)
        self._extend = client.register_script(_EXTEND)

    def acquire(self, name: str, *, ttl_s: float, wait_s: float) -> str | None:
        token = secrets.token_hex(16)
        deadline = time.monotonic() + wait_s
        pause = 0.002
        while True:
            try:
                if self._r.set(self._prefix + name, token, nx=True, px=max(1, int(ttl_s * 1000))):
                    return token
            except redis.RedisError as exc:
                log.warning("Redis lock failed: %s", exc)
                raise BackendUnavailable(f"Redis lock failed ({type(exc).__name__})") from None
            if time.monotonic() >= deadline:
                return None
            time.sleep(pause)
            pause = min(pause * 2, 0.05)

    def release(self, name: str, token: str) -> bool:
        return bool(self._release(keys=[self._prefix + name], args=[token]))

    def extend(self, name: str, token: str, ttl_s: float) -> bool:
        return bool(self._extend(keys=[self._prefix + name], args=[token, int(ttl_s * 1000)]))


class RedisWakeup:
    """Publishes "a job was queued" on a channel; each worker process listens on its own subscription."""

    def __init__(self, client: redis.Redis, channel: str = "memstrata:jobs") -> None:
        self._r = client
        self._channel = channel
        self._pubsub: Any = None
        self._local = threading.Event()
        self._lock = threading.Lock()

    def notify(self) -> None:
        self._local.set()
        # Wake-ups are an optimisation: workers poll anyway.
        with contextlib.suppress(redis.RedisError):
            self._r.publish(self._channel, b"1")

    def _subscription(self) -> Any:
        with self._lock:
            if self._pubsub is None:
                self._pubsub = self._r.pubsub(ignore_subscribe_messages=True)  # type: ignore[no-untyped-call]
                self._pubsub.subscribe(self._channel)
            return self._pubsub

    def wait(self, timeout: float) -> bool:
        if self._local.is_set():
            self._local.clear()
            return True
        try:
            message = self._subscription().get_message(timeout=timeout)
        except redis.RedisError:
            # Redis is away: wait out the poll, but a local notify (a stopping worker) ends it.
            woke = self._local.wait(timeout)
            self._local.clear()
            return woke
        return message is not None

    def close(self) -> None:
        self._local.set()
        with self._lock:
            if self._pubsub is not None:
                self._pubsub.close()
                self._pubsub = None
