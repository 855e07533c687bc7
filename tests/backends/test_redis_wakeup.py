"""Redis wake-ups: a worker asleep on a long poll starts a job queued by another handle at once."""

from __future__ import annotations

import threading
import time
from pathlib import Path

from memstrata import Memory, Scope
from memstrata.config import Settings
from support import REDIS_URL, redis_client


def test_a_queued_job_wakes_a_sleeping_worker(tmp_path: Path) -> None:
    client = redis_client()  # skips, naming the server, when Redis is not running
    url = f"sqlite:///{tmp_path / 'm.db'}"
    # A poll far longer than the test may wait: only the wake-up can start the job in time.
    settings = Settings(home=tmp_path, worker="off", redis=REDIS_URL, worker_poll_seconds=300)
    sleeper = Memory.open(url, settings=settings)
    producer = Memory.open(url, settings=settings)
    done = threading.Event()
    sleeper.jobs.register("ping", lambda job, m: done.set())
    try:
        before = client.pubsub_numsub("memstrata:jobs")[0][1]
        sleeper.core.worker().start()
        deadline = time.monotonic() + 30
        while client.pubsub_numsub("memstrata:jobs")[0][1] <= before:  # it is listening
            assert time.monotonic() < deadline, "the worker never subscribed"
            time.sleep(0.02)
        producer.jobs.enqueue(Scope("acme", "u1"), "ping")
        assert done.wait(30), "the worker slept through the wake-up"
    finally:
        sleeper.close()
        producer.close()


def test_readyz_backends_include_redis(tmp_path: Path) -> None:
    redis_client()
    mem = Memory.open(
        f"sqlite:///{tmp_path / 'm.db'}",
        settings=Settings(home=tmp_path, worker="off", redis=REDIS_URL),
    )
    try:
        assert mem.core.check() == {"sqlite": "ok", "redis": "ok"}
    finally:
        mem.close()
