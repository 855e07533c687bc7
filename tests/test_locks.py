"""The lock port on every implementation: exclusion, ownership, waiting, release."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from memstrata.errors import Conflict
from memstrata.locks import DistributedLock, FileLock, hold
from support import NEEDS_POSTGRES, POSTGRES_URL, postgres_available, redis_client


@pytest.fixture(params=["file", "redis", "postgres"])
def lock(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[DistributedLock]:
    if request.param == "file":
        yield FileLock(tmp_path / "locks")
    elif request.param == "redis":
        from memstrata.backends.redis import RedisLock

        yield RedisLock(redis_client(), prefix=f"test:{tmp_path.name}:")
    else:
        if not postgres_available():
            pytest.skip(NEEDS_POSTGRES)
        from memstrata.backends.postgres import PostgresEngine, PostgresLock

        engine = PostgresEngine(POSTGRES_URL, max_size=2)
        yield PostgresLock(engine)
        engine.close()


def test_exclusive_and_owned(lock: DistributedLock, tmp_path: Path) -> None:
    name = f"node:{tmp_path.name}"
    token = lock.acquire(name, ttl_s=30, wait_s=0)
    assert token is not None
    assert lock.acquire(name, ttl_s=30, wait_s=0.05) is None
    assert not lock.release(name, "not-the-owner")
    assert lock.acquire(name, ttl_s=30, wait_s=0) is None  # a wrong token released nothing
    assert lock.release(name, token)
    again = lock.acquire(name, ttl_s=30, wait_s=0)
    assert again is not None
    lock.release(name, again)


def test_threads_never_overlap(lock: DistributedLock, tmp_path: Path) -> None:
    name = f"counter:{tmp_path.name}"
    inside = 0
    overlaps = 0
    total = 0
    guard = threading.Lock()

    def work() -> None:
        nonlocal inside, overlaps, total
        for _ in range(15):
            with hold(lock, name, ttl_s=30, wait_s=30):
                with guard:
                    inside += 1
                    overlaps += inside > 1
                time.sleep(0.001)
                with guard:
                    inside -= 1
                    total += 1

    threads = [threading.Thread(target=work) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert total == 60
    assert overlaps == 0


def test_hold_raises_conflict_when_busy(lock: DistributedLock, tmp_path: Path) -> None:
    name = f"busy:{tmp_path.name}"
    token = lock.acquire(name, ttl_s=30, wait_s=0)
    assert token is not None
    with pytest.raises(Conflict), hold(lock, name, wait_s=0.05):
        pass
    lock.release(name, token)


def test_redis_lock_expires_when_its_holder_stops_renewing(tmp_path: Path) -> None:
    from memstrata.backends.redis import RedisLock

    lock = RedisLock(redis_client(), prefix=f"test:{tmp_path.name}:")
    token = lock.acquire("ttl", ttl_s=0.2, wait_s=0)
    assert token is not None
    assert lock.extend("ttl", token, 0.2)
    assert lock.acquire("ttl", ttl_s=1, wait_s=2) is not None  # freed by its TTL
    assert not lock.extend("ttl", token, 1)
