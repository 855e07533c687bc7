"""A short-lived cache of checked API keys, so a request costs no key lookup.

Looking a key up is a database read (a thread hand-off on SQLite, a round trip on
PostgreSQL) on every request. The cache keeps the principal of a key that was found
for ``ttl_s`` seconds (``Settings.key_cache_s``); unknown keys are never cached, so a
key made elsewhere works at once and a wrong key always costs a lookup (which the
failed-authentication limiter bounds). A key revoked, expired or deleted elsewhere is
refused within ``ttl_s``; deletions made through the same server clear the cache at once.
Entries are keyed by the key's SHA-256, never by the secret itself.
"""

from __future__ import annotations

import hashlib
import time
from collections.abc import Callable

from memstrata.storage.tenancy import Principal

__all__ = ["KeyCache"]


class KeyCache:
    def __init__(
        self,
        ttl_s: float,
        *,
        max_entries: int = 10_000,
        clock: Callable[[], float] = time.monotonic,
    ) -> None:
        self.ttl_s = ttl_s
        self.max_entries = max_entries
        self._clock = clock
        self._entries: dict[bytes, tuple[float, Principal]] = {}

    @property
    def enabled(self) -> bool:
        return self.ttl_s > 0

    @staticmethod
    def _key(secret: str) -> bytes:
        return hashlib.sha256(secret.encode("utf-8", "surrogatepass")).digest()

    def get(self, secret: str) -> Principal | None:
        if not self.enabled:
            return None
        key = self._key(secret)
        entry = self._entries.get(key)
        if entry is None:
            return None
        until, found = entry
        if self._clock() >= until:
            del self._entries[key]
            return None
        return found

    def put(self, secret: str, found: Principal) -> None:
        if not self.enabled:
            return
        if len(self._entries) >= self.max_entries:
            self._evict()
        self._entries[self._key(secret)] = (self._clock() + self.ttl_s, found)

    def _evict(self) -> None:
        now = self._clock()
        for key in [k for k, (until, _) in self._entries.items() if until <= now]:
            del self._entries[key]
        if len(self._entries) >= self.max_entries:  # all live: start afresh, lookups refill it
            self._entries.clear()

    def __len__(self) -> int:
        return len(self._entries)

    def clear(self) -> None:
        self._entries.clear()
