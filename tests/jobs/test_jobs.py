"""The job system on every backend: debounce, max wait, leases, crashes, dead letters."""

from __future__ import annotations

import subprocess
import sys
import threading
import time
from collections import Counter
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memstrata import Conflict, InvalidInput, Memory, NotFound, Scope
from memstrata.jobs import ops
from memstrata.jobs.ops import JobStatus
from memstrata.storage.plan import read, write
from support import kill_once_started, open_memory, postgres_url_for

S = 1_000_000
SCOPE = Scope("acme", "u1")


@pytest.fixture(params=["sqlite-file", "postgres"])
def mem(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    yield from open_memory(request.param, tmp_path)


def _enqueue(mem: Memory, now: int, **kw):  # type: ignore[no-untyped-def]
    args: dict[str, Any] = {
        "job_id": mem.core.rt.make_id(),
        "kind": "extract",
        "key": "conv-1",
        "tenant": "acme",
        "user": "u1",
        "agent": None,
        "conversation_id": None,
        "payload": {},
        "flags": {},
        "delay_s": 30.0,
        "max_wait_s": 120.0,
        "max_attempts": 3,
        "now": now,
    }
    args.update(kw)
    return mem.core.engine.run(write(lambda: ops.enqueue(**args)))


def _claim(mem: Memory, now: int, lease_s: float = 10.0) -> list[ops.Job]:
    return mem.core.engine.run(
        write(lambda: ops.claim(kinds=None, worker="w", now=now, lease_s=lease_s))
    )


def test_ten_enqueues_in_the_window_run_once_with_merged_flags(mem: Memory) -> None:
    runs: list[ops.Job] = []
    mem.jobs.register("extract", lambda job, m: runs.append(job))
    ids = set()
    for i in range(10):
        job = mem.jobs.enqueue(
            SCOPE,
            "extract",
            key="conv-1",
            payload={"upto": i},
            flags={"correction": i == 2, "reinforcement": i == 7, "noise": False},
            delay_s=0.0,
            max_wait_s=60,
        )
        ids.add(job.id)
    assert len(ids) == 1
    assert mem.jobs.run_pending() == 1
    assert len(runs) == 1
    assert runs[0].payload == {"upto": 9}  # the newest content wins
    assert runs[0].flags == {"correction": True, "reinforcement": True}
    assert runs[0].enqueue_count == 10
    assert mem.jobs.get(runs[0].id).status is JobStatus.DONE


def test_debounce_pushes_run_after_but_not_past_max_wait(mem: Memory) -> None:
    t0 = 1_000 * S
    first = _enqueue(mem, t0, delay_s=3.0, max_wait_s=10.0)
    for step in range(1, 11):  # steady traffic every second
        now = t0 + step * S
        job = _enqueue(mem, now, delay_s=3.0, max_wait_s=10.0)
        assert job.id == first.id
        assert job.run_after.timestamp() * S <= t0 + 10 * S
        if step < 10:
            assert _claim(mem, now) == []  # pushed back while traffic goes on...
    claimed = _claim(mem, t0 + 10 * S)  # ...but due by the maximum wait all the same
    assert [j.id for j in claimed] == [first.id]


def test_push_back_is_the_flagless_merge_in_one_statement(mem: Memory) -> None:
    t0 = 1_000 * S

    def push(now: int, key: str = "conv-1") -> bool:
        return mem.core.engine.run(
            write(
                lambda: ops.push_back(
                    kind="extract",
                    key=key,
                    payload={"leaf": now},
                    delay_s=3.0,
                    max_wait_s=10.0,
                    now=now,
                )
            )
        )

    assert not push(t0)  # nothing queued: the caller must enqueue
    first = _enqueue(mem, t0, delay_s=3.0, max_wait_s=10.0, flags={"correction": True})
    merged = _enqueue(mem, t0 + S, delay_s=3.0, max_wait_s=10.0)
    for step in range(2, 12):
        assert push(t0 + step * S)
    job = mem.jobs.get(first.id)
    assert job.id == merged.id
    assert job.enqueue_count == 12
    assert job.payload == {"leaf": t0 + 11 * S}
    assert job.flags == {"correction": True}
    # Pushed back by each call, never past first_enqueued_at + max_wait.
    assert job.run_after.timestamp() * S == t0 + 10 * S
    assert not push(t0, key="other")


def test_different_keys_and_no_key_do_not_merge(mem: Memory) -> None:
    now = 5 * S
    a = _enqueue(mem, now, key="a")
    b = _enqueue(mem, now, key="b")
    c = _enqueue(mem, now, key=None)
    d = _enqueue(mem, now, key=None)
    assert len({a.id, b.id, c.id, d.id}) == 4


def test_running_key_blocks_a_second_run_of_the_same_key(mem: Memory) -> None:
    now = 100 * S
    _enqueue(mem, now, delay_s=0.0)
    [running] = _claim(mem, now)
    second = _enqueue(mem, now + 1, delay_s=0.0)
    assert second.id != running.id  # a new queued job: fresh content arrived after the claim
    assert _claim(mem, now + 2) == []  # but it waits while the first one runs
    assert mem.core.engine.run(
        write(lambda: ops.complete(running.id, running.lease_token or "", now + 3))
    )
    assert [j.id for j in _claim(mem, now + 4)] == [second.id]


def test_failures_back_off_then_dead_letter_then_retry(mem: Memory) -> None:
    calls = Counter[str]()

    def flaky(job: ops.Job, m: Memory) -> None:
        calls[job.id] += 1
        if calls[job.id] <= 3:
            raise RuntimeError(f"boom {calls[job.id]}")

    mem.jobs.register("flaky", flaky)
    mem.core.worker()._backoff = lambda attempts: 0  # no waiting in the test
    job = mem.jobs.enqueue(SCOPE, "flaky", max_attempts=3)
    assert mem.jobs.run_pending() == 3
    dead = mem.jobs.get(job.id)
    assert dead.status is JobStatus.DEAD
    assert dead.attempts == 3
    assert "boom 3" in (dead.last_error or "")
    assert [j.id for j in mem.jobs.list(status="dead").items] == [job.id]
    with pytest.raises(Conflict):
        mem.jobs.retry(mem.jobs.enqueue(SCOPE, "other").id)
    with pytest.raises(NotFound):
        mem.jobs.retry(job.id, tenant="someone-else")
    again = mem.jobs.retry(job.id)
    assert again.status is JobStatus.QUEUED
    assert again.attempts == 0
    assert mem.jobs.run_pending(kinds=["flaky"]) == 1
    assert mem.jobs.get(job.id).status is JobStatus.DONE


def test_backoff_grows_and_is_capped() -> None:
    delays = [ops.backoff_micros(n, base_s=1, cap_s=30) for n in range(1, 10)]
    assert delays[0] >= 1 * S
    assert delays[1] >= 2 * S
    assert all(d <= 30 * S * 1.25 for d in delays)


def test_lease_expiry_reclaims_and_fences_the_old_holder(mem: Memory) -> None:
    now = 50 * S
    _enqueue(mem, now, delay_s=0.0)
    [first] = _claim(mem, now, lease_s=5)
    assert _claim(mem, now + 4 * S) == []  # lease alive: nobody else gets it
    [second] = _claim(mem, now + 6 * S, lease_s=5)  # the holder died: reclaimed
    assert second.id == first.id
    assert second.attempts == 2
    old_token, new_token = first.lease_token or "", second.lease_token or ""
    assert not mem.core.engine.run(write(lambda: ops.complete(first.id, old_token, now + 7 * S)))
    assert not mem.core.engine.run(
        write(lambda: ops.heartbeat(first.id, old_token, now + 7 * S, 5))
    )
    assert mem.core.engine.run(write(lambda: ops.complete(first.id, new_token, now + 7 * S)))


def test_last_attempt_lost_to_a_crash_is_dead(mem: Memory) -> None:
    now = 70 * S
    _enqueue(mem, now, delay_s=0.0, max_attempts=1)
    [job] = _claim(mem, now, lease_s=1)
    assert _claim(mem, now + 2 * S) == []
    assert mem.jobs.get(job.id).status is JobStatus.DEAD


def test_parallel_workers_run_each_job_exactly_once(mem: Memory) -> None:
    seen = Counter[str]()
    lock = threading.Lock()

    def handler(job: ops.Job, m: Memory) -> None:
        with lock:
            seen[job.id] += 1

    mem.jobs.register("count", handler)
    made = [mem.jobs.enqueue(SCOPE, "count", payload={"i": i}).id for i in range(40)]
    threads = [threading.Thread(target=mem.jobs.run_pending) for _ in range(4)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert sorted(seen) == sorted(made)
    assert set(seen.values()) == {1}


def test_enqueue_validates(mem: Memory) -> None:
    with pytest.raises(InvalidInput):
        mem.jobs.enqueue(SCOPE, "", payload={})
    with pytest.raises(InvalidInput):
        mem.jobs.enqueue(SCOPE, "k", delay_s=10, max_wait_s=1)
    with pytest.raises(InvalidInput):
        mem.jobs.list(status="bogus")


def test_cascade_deletes_jobs_of_a_conversation_and_a_user(mem: Memory) -> None:
    conv = mem.conversations.create(SCOPE)
    kept = mem.jobs.enqueue(Scope("acme", "u2"), "x")
    mem.jobs.enqueue(SCOPE, "x", conversation_id=conv.id)
    user_job = mem.jobs.enqueue(SCOPE, "x")
    mem.conversations.delete(SCOPE, conv.id)
    assert {j.id for j in mem.jobs.list().items} == {kept.id, user_job.id}
    mem.users.delete(SCOPE)
    assert {j.id for j in mem.jobs.list().items} == {kept.id}


def test_stats_and_pagination(mem: Memory) -> None:
    for i in range(7):
        mem.jobs.enqueue(SCOPE, "p", payload={"i": i}, delay_s=3600, max_wait_s=3600)
    page = mem.jobs.list(limit=3)
    seen = [j.id for j in page.items]
    while page.next_cursor:
        page = mem.jobs.list(limit=3, cursor=page.next_cursor)
        seen += [j.id for j in page.items]
    assert len(seen) == len(set(seen)) == 7
    stats = mem.jobs.stats()
    assert stats["counts"]["queued"] == 7
    assert stats["oldest_ready_age_s"] == 0.0  # none is due yet


_CHILD = """
import sys, time
from pathlib import Path
from memstrata import Memory
from memstrata.config import Settings
url, home, marker = sys.argv[1], sys.argv[2], Path(sys.argv[3])
mem = Memory.open(url, settings=Settings(home=home, worker="off"))
def slow(job, m):
    with marker.open("a") as f:
        f.write("started\\n")
    time.sleep(60)
mem.jobs.register("slow", slow, lease_s=2.0)
mem.jobs.run_pending()
"""


@pytest.mark.slow
def test_worker_sigkilled_mid_job_is_reclaimed_and_finished_once(
    mem: Memory, tmp_path: Path
) -> None:
    engine = mem.core.engine
    if engine.dialect == "postgres":
        schema = engine._kwargs["options"].split("=", 1)[1]  # type: ignore[attr-defined]
        url = postgres_url_for(schema)
    else:
        url = f"sqlite:///{tmp_path / 'memstrata.db'}"
    job = mem.jobs.enqueue(SCOPE, "slow", payload={"n": 1})
    marker = tmp_path / "marker.txt"
    child = subprocess.Popen([sys.executable, "-c", _CHILD, url, str(tmp_path), str(marker)])
    kill_once_started(child, marker, "the job")
    assert mem.jobs.get(job.id).status is JobStatus.RUNNING  # nobody has reclaimed it yet
    finished = Counter[str]()
    mem.jobs.register("slow", lambda j, m: finished.update([j.id]), lease_s=2.0)
    deadline = time.monotonic() + 30
    while not finished:  # the dead worker's lease runs out within ~2 s
        assert time.monotonic() < deadline, "the job was never reclaimed"
        mem.jobs.run_pending()
        time.sleep(0.1)
    mem.jobs.run_pending()
    assert finished == Counter({job.id: 1})
    done = mem.jobs.get(job.id)
    assert done.status is JobStatus.DONE
    assert done.attempts == 2
    assert marker.read_text().count("started") == 1


def test_in_process_worker_thread_runs_jobs_on_the_embedded_default(tmp_path: Path) -> None:
    from memstrata.config import Settings

    mem = Memory.open(f"sqlite:///{tmp_path / 'm.db'}", settings=Settings(home=tmp_path))
    done = threading.Event()
    mem.jobs.register("ping", lambda job, m: done.set())
    mem.jobs.enqueue(SCOPE, "ping")
    assert done.wait(30)
    mem.close()
    assert not mem.core.worker().running


def test_queue_reads_are_plain_reads(mem: Memory) -> None:
    now = mem.core.rt.clock()
    assert mem.core.engine.run(read(lambda: ops.queue_stats(now)))["counts"]["queued"] == 0


def test_each_kind_is_leased_for_its_own_time(mem: Memory) -> None:
    now = 90 * S
    _enqueue(mem, now, kind="short", key=None, delay_s=0.0)
    leases = {"short": 2.0, "long": 600.0}
    [job] = mem.core.engine.run(
        write(lambda: ops.claim(kinds=["short", "long"], worker="w", now=now, lease_s=leases))
    )
    assert job.kind == "short"
    # Its worker dies: the job is back after the short lease, not the long one.
    again = mem.core.engine.run(
        write(
            lambda: ops.claim(kinds=["short", "long"], worker="w2", now=now + 3 * S, lease_s=leases)
        )
    )
    assert [j.id for j in again] == [job.id]
