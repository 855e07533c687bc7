"""A stopping worker: it finishes the job in hand and claims no other, an idle one wakes at
once, and a worker whose lease was taken over neither completes nor fails the job."""

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from pathlib import Path

import pytest
import redis

from memstrata import Memory, Scope
from memstrata.backends.redis import RedisWakeup
from memstrata.config import Settings
from memstrata.jobs import ops
from memstrata.jobs.ops import Job, JobStatus
from memstrata.storage.plan import Exec, Op, write
from memstrata.storage.sql import now_micros
from support import open_memory

SCOPE = Scope("acme", "u1")
# Long enough that a test passes only if the worker is woken, never by its poll running out.
LONG_POLL_S = 300.0


def _open(tmp_path: Path) -> Memory:
    return Memory.open(
        f"sqlite:///{tmp_path / 'm.db'}",
        settings=Settings(home=tmp_path, worker="off", worker_poll_seconds=LONG_POLL_S),
    )


def _until(condition: object, what: str) -> None:
    """Wait for ``condition()`` (a guard against hanging, not a measure of speed)."""
    deadline = time.monotonic() + 60
    while not condition():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"never: {what}"
        time.sleep(0.01)


def test_close_lets_the_running_job_finish_and_starts_no_other(tmp_path: Path) -> None:
    mem = _open(tmp_path)
    started: list[str] = []
    release = threading.Event()

    def blocking(job: Job, m: Memory) -> None:
        started.append(job.id)
        release.wait(60)

    mem.jobs.register("block", blocking)
    queued = [mem.jobs.enqueue(SCOPE, "block").id for _ in range(3)]
    worker = mem.core.worker()
    worker.start()
    _until(lambda: started, "the first job started")
    closer = threading.Thread(target=mem.close)
    closer.start()
    _until(lambda: worker.stopping, "the worker was told to stop")
    release.set()  # the job in hand finishes; the worker must not claim the next
    closer.join(60)
    assert not closer.is_alive()
    assert not worker.running
    assert len(started) == 1
    again = _open(tmp_path)
    try:
        states = {j: again.jobs.get(j).status for j in queued}
    finally:
        again.close()
    assert states[started[0]] is JobStatus.DONE
    assert sorted(s.value for j, s in states.items() if j != started[0]) == ["queued", "queued"]


def test_close_wakes_an_idle_worker(tmp_path: Path) -> None:
    mem = _open(tmp_path)
    ran = threading.Event()
    mem.jobs.register("ping", lambda job, m: ran.set())
    mem.jobs.enqueue(SCOPE, "ping")
    worker = mem.core.worker()
    worker.start()
    assert ran.wait(60)  # then it finds nothing more and waits on its long poll
    closer = threading.Thread(target=mem.close)
    closer.start()
    closer.join(60)
    assert not closer.is_alive()
    assert not worker.running


def test_a_redis_wakeup_without_redis_still_wakes_on_notify() -> None:
    # Nothing listens on port 1: every wait fails over to waiting for a local notify.
    wakeup = RedisWakeup(redis.Redis(port=1, socket_connect_timeout=1))
    woke: list[bool] = []
    waiter = threading.Thread(target=lambda: woke.append(wakeup.wait(LONG_POLL_S)))
    waiter.start()
    time.sleep(0.2)  # let it reach the failed subscription (either order must wake it)
    wakeup.notify()
    waiter.join(60)
    assert not waiter.is_alive()
    assert woke == [True]
    wakeup.close()


@pytest.fixture(params=["sqlite-file", "postgres"])
def mem(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    yield from open_memory(request.param, tmp_path)


def _take_over(m: Memory, job: Job) -> str:
    """What a second worker does once the first one's lease ran out: reclaim the job."""
    m.core.engine.run(write(lambda: _expire(job.id)))
    [taken] = m.core.engine.run(
        write(lambda: ops.claim(kinds=[job.kind], worker="thief", now=now_micros(), lease_s=60))
    )
    assert taken.id == job.id
    return taken.lease_token or ""


def _expire(job_id: str) -> Op[None]:
    yield Exec("UPDATE jobs SET lease_until = ? WHERE id = ?", (0, job_id))


@pytest.mark.parametrize("outcome", ["returns", "raises"])
def test_a_worker_that_lost_its_lease_leaves_the_job_to_its_new_holder(
    mem: Memory, outcome: str
) -> None:
    tokens: list[str] = []

    def handler(job: Job, m: Memory) -> None:
        tokens.append(_take_over(m, job))
        if outcome == "raises":
            raise RuntimeError("too late anyway")

    mem.jobs.register("stolen", handler)
    job = mem.jobs.enqueue(SCOPE, "stolen")
    assert mem.jobs.run_pending(["stolen"]) == 1
    after = mem.jobs.get(job.id)
    assert after.status is JobStatus.RUNNING  # neither done nor failed by the old holder
    assert after.lease_token == tokens[0]
    assert after.last_error is None
