"""Jobs, issue 28 (N3): every id in a job is checked before anything is queued, and
failing a job always succeeds, whatever its error says. Every backend."""

from __future__ import annotations

import pytest

from memstrata import Memory, Scope
from memstrata.errors import InvalidInput, PreconditionFailed
from memstrata.jobs.ops import JobStatus
from memstrata.storage.plan import Op, Query, read

S = Scope("jobs28", "u")
NUL = "a\x00b"
SURROGATE = "x\ud800y"


def _count_jobs(mem: Memory) -> int:
    def op() -> Op[int]:
        rows = yield Query("SELECT count(*) FROM jobs")
        return int(rows[0][0])

    return mem.core.engine.run(read(op))


@pytest.mark.parametrize("bad", [NUL, SURROGATE, "not-a-uuid", 7])
def test_n3_ids_in_a_job_are_checked_before_it_is_queued(memory: Memory, bad: object) -> None:
    cid = memory.conversations.create(S).id
    before = _count_jobs(memory)
    with pytest.raises(InvalidInput):
        memory.compaction.schedule(S, cid, leaf_id=bad)  # type: ignore[arg-type]
    with pytest.raises(InvalidInput):
        memory.jobs.enqueue(S, "custom", payload={"leaf_id": bad})
    with pytest.raises(InvalidInput):
        memory.jobs.enqueue(S, "custom", payload={"message_ids": [cid, bad]})
    if bad != "not-a-uuid":  # a node memory's conversation may be named, not a UUID
        with pytest.raises(InvalidInput):
            memory.jobs.enqueue(S, "custom", conversation_id=bad)  # type: ignore[arg-type]
        with pytest.raises(InvalidInput):
            memory.jobs.enqueue(S, "custom", payload={"node_id": bad})
    if isinstance(bad, str) and bad != "not-a-uuid":
        with pytest.raises(InvalidInput):
            memory.jobs.enqueue(S, "custom", key=bad)
        with pytest.raises(InvalidInput):
            memory.jobs.enqueue(S, f"custom{bad}")
    assert _count_jobs(memory) == before
    # A well-formed id in any case is stored in its canonical form.
    job = memory.jobs.enqueue(
        S, "custom", payload={"leaf_id": cid.upper(), "node_id": "n-1", "note": NUL}
    )
    assert job.payload == {"leaf_id": cid, "node_id": "n-1", "note": NUL}  # JSON keeps a NUL


@pytest.mark.parametrize("text", [NUL, SURROGATE, "plain"])
def test_n3_failing_a_job_always_succeeds(memory: Memory, text: str) -> None:
    def handler(job, mem) -> None:  # type: ignore[no-untyped-def]
        raise ValueError(f"cannot use {text}")

    memory.jobs.register("test.fails", handler)
    job = memory.jobs.enqueue(S, "test.fails", max_attempts=2)
    assert memory.jobs.run_pending(["test.fails"]) == 1
    failed = memory.jobs.get(job.id)
    assert failed.status is JobStatus.QUEUED  # one attempt left
    assert failed.attempts == 1
    assert failed.last_error is not None
    assert "\x00" not in failed.last_error
    failed.last_error.encode()  # storable text: no lone surrogate
    if text != "plain":
        assert (
            "cannot use a\\x00b" in failed.last_error or "cannot use x\\ud800y" in failed.last_error
        )


def test_n5_a_version_no_document_can_reach_is_a_failed_precondition(memory: Memory) -> None:
    cid = memory.conversations.create(S).id
    memory.plans.put(S, cid, {"step": 1})
    for huge in (2**63, 10**23):
        with pytest.raises(PreconditionFailed):
            memory.plans.put(S, cid, {"step": 2}, expected_version=huge)
        with pytest.raises(PreconditionFailed):
            memory.working.put(S, "notes", expected_version=huge)
    assert memory.plans.get(S, cid).document == {"step": 1}
