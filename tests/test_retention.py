"""Retention: per-tenant policies, dry runs that count, gc that deletes exactly what the
policy says (derived data included), and the periodic job."""

from __future__ import annotations

import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest

from memstrata import Memory, Scope
from memstrata.api._async_retention import RETENTION_JOB
from memstrata.errors import InvalidInput
from memstrata.jobs.ops import JobStatus
from memstrata.storage.plan import Query, read
from memstrata.testing.conformance import fresh_scope

DAY = 86_400 * 1_000_000


class Clock:
    def __init__(self, start: int) -> None:
        self.now = start

    def __call__(self) -> int:
        return self.now


def _rows(mem: Memory, sql: str, params: tuple[Any, ...] = ()) -> int:
    def op() -> Any:
        rows = yield Query(sql, params)
        return int(rows[0][0])

    return mem.core.engine.run(read(op))


def _conversation(mem: Memory, s: Scope, clock: Clock, day: int, word: str) -> str:
    clock.now = day * DAY
    c = mem.conversations.create(s, title=word)
    mem.messages.append(s, c.id, role="user", content=f"{word} message")
    mem.messages.append(s, c.id, role="assistant", content="reply")
    mem.facts.add(s, f"fact {word}")
    mem.snapshots.put(s, c.id, "run", {"w": word})
    return c.id


@pytest.fixture
def clocked(memory: Memory) -> tuple[Memory, Clock]:
    clock = Clock(0)
    memory.core.rt.clock = clock
    return memory, clock


def test_policies_delete_exactly_what_they_say(clocked: tuple[Memory, Clock]) -> None:
    mem, clock = clocked
    a, b = fresh_scope(), fresh_scope()
    old_a = _conversation(mem, a, clock, 1000, "olda")
    new_a = _conversation(mem, a, clock, 1080, "newa")
    old_b = _conversation(mem, b, clock, 1000, "oldb")
    mid_b = _conversation(mem, b, clock, 1050, "midb")
    clock.now = 1100 * DAY
    # a keeps conversations 30 days; everyone else (b) 90 days; snapshots 60 days for all.
    mem.retention.set(a.tenant, "conversations", 30 * 86_400)
    mem.retention.set("*", "conversations", 90 * 86_400)
    mem.retention.set("*", "snapshots", 60 * 86_400)
    assert {(p.tenant, p.kind) for p in mem.retention.policies()} >= {
        (a.tenant, "conversations"),
        ("*", "conversations"),
    }

    def count(table: str, where: str = "1 = 1", params: tuple[Any, ...] = ()) -> int:
        return _rows(mem, f"SELECT count(*) FROM {table} WHERE {where}", params)

    messages_before = count("messages")
    dry = mem.retention.apply(dry_run=True, tenant=None)
    # a: old_a (100 days idle > 30); b: old_b (100 > 90), not mid_b (50 < 90).
    # Other tests' data in a shared store may also be old: only compare what we own.
    assert dry["conversations"] >= 2
    assert count("messages") == messages_before  # a dry run deletes nothing
    mine = mem.retention.apply(dry_run=True, tenant=a.tenant)
    assert mine["conversations"] == 1
    assert mine["snapshots"] == 1  # old_a's snapshot (100 days); new_a's is 20 days old

    mem.retention.apply(tenant=a.tenant)
    mem.retention.apply(tenant=b.tenant)
    assert [c.id for c in mem.conversations.list(a).items] == [new_a]
    assert [c.id for c in mem.conversations.list(b).items] == [mid_b]
    # Derived data went with them: messages, recall rows, snapshots, fact provenance.
    for cid in (old_a, old_b):
        assert count("messages", "conversation_id = ?", (cid,)) == 0
        assert count("recall_docs", "conversation_id = ?", (cid,)) == 0
        assert count("run_snapshots", "conversation_id = ?", (cid,)) == 0
    for cid in (new_a, mid_b):
        assert count("messages", "conversation_id = ?", (cid,)) == 2
    # Manual facts are the user's, not the conversation's: they stay.
    assert len(mem.facts.list(a).items) == 2


def test_overrides_jobs_and_checkpoints(clocked: tuple[Memory, Clock]) -> None:
    mem, clock = clocked
    s = fresh_scope()
    clock.now = 500 * DAY
    mem.jobs.register("noop", lambda job, m: None)
    done = mem.jobs.enqueue(s, "noop")
    mem.jobs.run_pending(["noop"])
    assert mem.jobs.get(done.id).status is JobStatus.DONE
    mem.checkpoints.save(s, "cp", "r1", {"x": 1}, ttl_s=60)
    clock.now = 510 * DAY
    recent = mem.jobs.enqueue(s, "noop")
    mem.jobs.run_pending(["noop"])
    # Workers stamp jobs with the wall clock: set the finish times this test is about.
    _stamp(mem, done.id, 500 * DAY)
    _stamp(mem, recent.id, 510 * DAY)
    got = mem.retention.apply(
        overrides={"jobs": 7 * 86_400, "checkpoints": 86_400}, tenant=s.tenant
    )
    assert got["jobs"] == 1
    assert got["checkpoints"] == 1
    with pytest.raises(Exception, match="not found"):
        mem.jobs.get(done.id)
    assert mem.jobs.get(recent.id).status is JobStatus.DONE
    with pytest.raises(InvalidInput):
        mem.retention.apply(overrides={"everything": 1})
    with pytest.raises(InvalidInput):
        mem.retention.set(s.tenant, "conversations", 0)


def _stamp(mem: Memory, job_id: str, at: int) -> None:
    from memstrata.storage.plan import Exec, write

    def op() -> Any:
        yield Exec("UPDATE jobs SET finished_at = ? WHERE id = ?", (at, job_id))

    mem.core.engine.run(write(op))


def test_the_periodic_job_applies_policies_and_comes_back(clocked: tuple[Memory, Clock]) -> None:
    mem, clock = clocked
    s = fresh_scope()
    # Workers claim by the wall clock, so this test's times are real ones.
    real_now = time.time_ns() // 1000
    _conversation(mem, s, clock, 0, "ancient")  # day 0 of the test clock: long ago
    clock.now = real_now
    mem.retention.set(s.tenant, "conversations", 30 * 86_400)
    [job] = [j for j in mem.jobs.list(status="queued", limit=500).items if j.kind == RETENTION_JOB]
    run: Callable[[], int] = lambda: mem.jobs.run_pending([RETENTION_JOB])  # noqa: E731
    assert run() == 1
    assert mem.conversations.list(s).items == []
    # It queued its next run, an interval later (so not due now).
    [again] = [
        j for j in mem.jobs.list(status="queued", limit=500).items if j.kind == RETENTION_JOB
    ]
    assert again.id != job.id
    assert again.run_after.timestamp() > time.time() + 3000
    assert run() == 0


def test_cli_policies_and_gc(tmp_path: Path) -> None:
    import json

    from typer.testing import CliRunner

    from memstrata.cli import app
    from memstrata.config import Settings

    db = f"sqlite:///{tmp_path / 'r.db'}"
    mem = Memory.open(db, settings=Settings(home=tmp_path, worker="off"))
    clock = Clock(10 * DAY)
    mem.core.rt.clock = clock
    s = Scope("acme", "u1")
    _conversation(mem, s, clock, 10, "old")
    mem.close()
    runner = CliRunner()

    def run(*args: str, code: int = 0) -> Any:
        result = runner.invoke(app, [*args, "--db", db])
        assert result.exit_code == code, (result.stdout, result.stderr)
        return result

    run("retention", "set", "--tenant", "acme", "--kind", "conversations", "--max-age", "30d")
    [policy] = json.loads(run("retention", "list", "--json").stdout)
    assert (policy["tenant"], policy["kind"], policy["max_age_s"]) == (
        "acme",
        "conversations",
        2592000,
    )
    dry = json.loads(run("gc", "--policies", "--dry-run", "--json").stdout)
    assert dry == {"dry_run": True, "counts": dict(dry["counts"], conversations=1)}
    assert "deleted 1 conversations" in run("gc", "--policies").stdout
    assert (
        json.loads(run("gc", "--conversations-idle", "1d", "--json").stdout)["counts"][
            "conversations"
        ]
        == 0
    )
    run("retention", "set", "--tenant", "acme", "--kind", "everything", "--max-age", "1d", code=1)
    assert (
        "deleted the conversations policy"
        in run("retention", "delete", "--tenant", "acme", "--kind", "conversations").stdout
    )
    run("gc", code=2)
