"""The distributed lock port and its embedded implementation.

A lock has a name, an owner token and a time to live: a holder that dies stops
renewing and the lock frees itself, so no crash can wedge a key. Redis
(``backends/redis.py``) and PostgreSQL advisory locks serve several hosts; the
file lock here serves several processes on one host (the embedded default).
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import secrets
import threading
import time
from collections.abc import Iterator
from pathlib import Path
from typing import Protocol

from memstrata.errors import Conflict

__all__ = ["DistributedLock", "FileLock", "hold"]


class DistributedLock(Protocol):
    """Mutual exclusion by name across processes (and hosts, for the server backends)."""

    def acquire(self, name: str, *, ttl_s: float, wait_s: float) -> str | None:
        """Return an owner token, or None if the lock was not free within ``wait_s``."""
        ...

    def release(self, name: str, token: str) -> bool:
        """Release if ``token`` still owns the lock; False if it had expired or moved on."""
        ...


@contextlib.contextmanager
def hold(
    lock: DistributedLock, name: str, *, ttl_s: float = 30.0, wait_s: float = 10.0
) -> Iterator[str]:
    """``with hold(lock, "node:...")``: raises Conflict if the lock stays taken for ``wait_s``."""
    token = lock.acquire(name, ttl_s=ttl_s, wait_s=wait_s)
    if token is None:
        raise Conflict(f"lock {name!r} is held elsewhere; try again", lock=name)
    try:
        yield token
    finally:
        lock.release(name, token)


class FileLock:
    """``flock`` on one file per name: processes on one host; freed by the kernel on exit."""

    def __init__(self, directory: Path) -> None:
        self._dir = directory  # created at the first acquire, not when a memory opens
        self._held: dict[str, tuple[int, str]] = {}
        self._mutex = threading.Lock()

    def _path(self, name: str) -> Path:
        return self._dir / (hashlib.sha256(name.encode()).hexdigest()[:32] + ".lock")

    def acquire(self, name: str, *, ttl_s: float, wait_s: float) -> str | None:
        # ttl_s is not needed: the kernel drops the lock when its process dies.
        deadline = time.monotonic() + wait_s
        self._dir.mkdir(parents=True, exist_ok=True)
        while True:
            with self._mutex:
                if name not in self._held:
                    fd = os.open(self._path(name), os.O_RDWR | os.O_CREAT, 0o600)
                    try:
                        fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
                    except BlockingIOError:
                        os.close(fd)
                    else:
                        token = secrets.token_hex(16)
                        self._held[name] = (fd, token)
                        return token
            if time.monotonic() >= deadline:
                return None
            time.sleep(0.005)

    def release(self, name: str, token: str) -> bool:
        with self._mutex:
            held = self._held.get(name)
            if held is None or held[1] != token:
                return False
            del self._held[name]
        fd = held[0]
        fcntl.flock(fd, fcntl.LOCK_UN)
        os.close(fd)
        return True
