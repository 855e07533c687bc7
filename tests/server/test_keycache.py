"""The key cache on its own: found keys kept for their time, never unknown ones, bounded."""

from __future__ import annotations

from memstrata.server.keycache import KeyCache
from memstrata.storage.tenancy import Principal

ALICE = Principal(key_id="k1", tenant="t", user="alice", admin=False)


def _cache(ttl: float, **kw: int) -> tuple[KeyCache, list[float]]:
    now = [0.0]
    return KeyCache(ttl, clock=lambda: now[0], **kw), now


def test_a_found_key_is_kept_until_its_time_then_looked_up_again() -> None:
    cache, now = _cache(1.0)
    assert cache.get("msk_a") is None
    cache.put("msk_a", ALICE)
    now[0] = 0.99
    assert cache.get("msk_a") == ALICE
    now[0] = 1.0
    assert cache.get("msk_a") is None
    assert cache.get("msk_a") is None  # the expired entry is gone


def test_off_keeps_nothing() -> None:
    cache, _ = _cache(0)
    cache.put("msk_a", ALICE)
    assert not cache.enabled
    assert cache.get("msk_a") is None


def test_full_cache_drops_expired_entries_first_and_never_grows_past_its_bound() -> None:
    cache, now = _cache(10.0, max_entries=3)
    cache.put("a", ALICE)
    cache.put("b", ALICE)
    now[0] = 5.0
    cache.put("c", ALICE)
    now[0] = 11.0  # a and b expired, c live
    cache.put("d", ALICE)
    assert cache.get("c") == ALICE
    assert cache.get("d") == ALICE
    for name in "efgh":
        cache.put(name, ALICE)
    assert len(cache) <= 3


def test_entries_are_keyed_by_digest_not_by_the_secret() -> None:
    cache, _ = _cache(1.0)
    cache.put("msk_secret_value", ALICE)
    assert all("msk_secret_value" not in repr(k) for k in cache._entries)
    cache.clear()
    assert cache.get("msk_secret_value") is None
