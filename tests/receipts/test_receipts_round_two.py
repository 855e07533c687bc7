"""Deletion receipts, issue 28: scans scoped to what was deleted (N1), verification jobs
coalesced per tenant and of low priority (N1), agents kept apart (N4), and receipts that
verify after normal use with recorded contexts (records keep only ids that entered the
prompt). Every backend."""

from __future__ import annotations

import uuid

import pytest

from memstrata import Memory, Scope
from memstrata.errors import NotFound
from memstrata.jobs.ops import JobStatus
from memstrata.receipts import job as receipt_job
from memstrata.receipts.job import VERIFY_JOB
from memstrata.storage.plan import Exec, Op, Query, read, write

T = "rcpt2"


def _jobs(mem: Memory, kind: str, status: str = "queued") -> list[str]:
    def op() -> Op[list[str]]:
        rows = yield Query(
            "SELECT tenant_id FROM jobs WHERE kind = ? AND status = ?", (kind, status)
        )
        return [str(r[0]) for r in rows]

    return mem.core.engine.run(read(op))


def _large(mem: Memory, monkeypatch: pytest.MonkeyPatch, owner: Scope) -> None:
    """``owner`` holds a message, and every owner holding one counts as large: each of
    its verifications goes to its tenant's job."""
    settings = mem.core.settings.model_copy(update={"receipts_inline_scan_max_messages": 0})
    monkeypatch.setattr(mem.core, "settings", settings)
    cid = mem.conversations.create(owner).id
    mem.messages.append(owner, cid, role="user", content="a message")


def _later_table(mem: Memory) -> None:
    def op() -> Op[None]:
        yield Exec("CREATE TABLE later_notes (tenant_id TEXT, user_id TEXT, note TEXT)")

    mem.core.engine.run(write(op))


def _note(mem: Memory, tenant: str, user: str, note: str) -> None:
    def op() -> Op[None]:
        yield Exec("INSERT INTO later_notes VALUES (?, ?, ?)", (tenant, user, note))

    mem.core.engine.run(write(op))


def test_n1_a_fact_or_conversation_scan_reads_the_owners_rows_only(memory: Memory) -> None:
    """Another tenant's rows are not read by a scoped scan: an id planted there is not
    found (the unscoped scan found it), while the same id in the owner's rows is."""
    _later_table(memory)
    owner = Scope(T, "owner")
    fact = memory.facts.add(owner, "likes tea")
    _note(memory, "another-tenant", "someone", f"mentions {fact.id}")
    r = memory.facts.delete(owner, fact.id)
    assert (r.verified, r.findings) == (True, [])

    cid = memory.conversations.create(owner).id
    _note(memory, "another-tenant", "someone", f"mentions {cid}")
    _note(memory, T, owner.user, f"mentions {cid}")
    r = memory.conversations.delete(owner, cid)
    assert r.findings == ["later_notes.note: 1 rows contain a deleted id"]


def test_n1_a_user_deletion_still_scans_the_whole_store(memory: Memory) -> None:
    _later_table(memory)
    victim = Scope(T, "whole-store")
    cid = memory.conversations.create(victim).id
    _note(memory, "another-tenant", "someone", f"mentions {cid}")
    r = memory.users.delete(victim).receipt
    assert r.findings == ["later_notes.note: 1 rows contain a deleted id"]


def test_n1_verification_jobs_are_one_per_tenant_and_run_after_users_work(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    owner = Scope(T, "deleter")
    _large(memory, monkeypatch, owner)
    monkeypatch.setattr(receipt_job, "BUDGET_S", 3600.0)  # one run does them all
    receipts = [
        memory.facts.delete(owner, memory.facts.add(owner, f"fact {i}").id) for i in range(30)
    ]
    assert {r.verified for r in receipts} == {None}
    assert _jobs(memory, VERIFY_JOB) == [T]  # 30 deletions, one job waiting

    # Another tenant's work queued after them still runs first.
    ran: list[str] = []
    memory.jobs.register("test.user-work", lambda job, mem: ran.append(job.tenant))
    other = Scope("other-tenant", "u")
    memory.jobs.enqueue(other, "test.user-work")
    assert memory.jobs.run_pending(max_jobs=1) == 1
    assert ran == ["other-tenant"]
    assert _jobs(memory, VERIFY_JOB) == [T]

    assert memory.jobs.run_pending([VERIFY_JOB]) == 1
    assert {memory.receipts.get(owner, r.id).verified for r in receipts} == {True}
    assert _jobs(memory, VERIFY_JOB) == []


def test_n1_a_run_verifies_a_bounded_number_then_queues_the_rest(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    owner = Scope(T, "bounded")
    _large(memory, monkeypatch, owner)
    monkeypatch.setattr(receipt_job, "PER_RUN", 4)
    monkeypatch.setattr(receipt_job, "BUDGET_S", 3600.0)  # the count alone bounds the run
    ids = [memory.facts.delete(owner, memory.facts.add(owner, f"f{i}").id).id for i in range(10)]
    assert memory.jobs.run_pending([VERIFY_JOB], max_jobs=1) == 1
    states = [memory.receipts.get(owner, rid).verified for rid in ids]
    assert states == [True] * 4 + [None] * 6  # oldest first
    assert _jobs(memory, VERIFY_JOB) == [T]  # the rest queued again
    assert memory.jobs.run_pending([VERIFY_JOB]) == 2
    assert {memory.receipts.get(owner, rid).verified for rid in ids} == {True}


def test_n1_an_older_per_receipt_job_still_verifies(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A job queued by the previous version (one per receipt, its id in the payload)."""
    owner = Scope(T, "older-job")
    _large(memory, monkeypatch, owner)
    r = memory.facts.delete(owner, memory.facts.add(owner, "x").id)

    def drop() -> Op[None]:
        yield Exec("DELETE FROM jobs WHERE kind = ?", (VERIFY_JOB,))

    memory.core.engine.run(write(drop))
    old = memory.jobs.enqueue(Scope(T, "admin"), VERIFY_JOB, key=r.id, payload={"receipt_id": r.id})
    assert memory.jobs.run_pending([VERIFY_JOB]) == 1
    assert memory.jobs.get(old.id).status is JobStatus.DONE
    assert memory.receipts.get(owner, r.id).verified is True


def test_n4_receipts_keep_agents_apart(memory: Memory) -> None:
    user = Scope(T, "agents")
    agent = Scope(T, "agents", "helper")
    other_agent = Scope(T, "agents", "other")
    mine = memory.facts.delete(user, memory.facts.add(user, "mine").id)
    theirs = memory.facts.delete(agent, memory.facts.add(agent, "the agent's").id)
    assert memory.receipts.get(user, mine.id).id == mine.id
    assert memory.receipts.get(agent, theirs.id).id == theirs.id
    for scope, rid in ((user, theirs.id), (agent, mine.id), (other_agent, theirs.id)):
        with pytest.raises(NotFound):
            memory.receipts.get(scope, rid)
        with pytest.raises(NotFound):
            memory.receipts.verify(scope, rid)
    # The tenant's admins, naming the user, read both; naming an agent, that agent's.
    assert memory.receipts.get(user, theirs.id, admin=True).agent == "helper"
    assert memory.receipts.get(agent, theirs.id, admin=True).id == theirs.id
    with pytest.raises(NotFound):
        memory.receipts.get(agent, mine.id, admin=True)


def test_records_after_normal_use_leave_receipts_verified(memory: Memory) -> None:
    """A recorded context keeps ids of what entered the prompt only: candidates recall
    dropped, the leaf and the window's bounds leave no id behind a deletion."""
    scope = Scope(T, f"recorder-{uuid.uuid4().hex[:6]}")
    earlier = memory.conversations.create(scope).id
    for i in range(12):
        role = "user" if i % 2 == 0 else "assistant"
        text = f"my cat Tom{i} sleeps on the red sofa near port {8000 + i}"
        memory.messages.append(scope, earlier, role=role, content=text)
    fact = memory.facts.add(scope, "the cat is called Tom")
    now = memory.conversations.create(scope).id
    for i in range(10):
        role = "user" if i % 2 == 0 else "assistant"
        memory.messages.append(scope, now, role=role, content=f"what about the cat Tom{i}? sofa")
    # A tight budget: recall finds candidates in the earlier conversation and drops most.
    for budget in (60, 400):
        ctx = memory.context(scope, now, budget=budget, query="cat Tom sofa port", record=True)
        assert ctx.context_id is not None
    leaf = memory.history(scope, now).messages[-1].id

    for receipt in (
        memory.conversations.delete(scope, earlier),
        memory.messages.delete(scope, now, leaf),
        memory.facts.delete(scope, fact.id),
    ):
        assert (receipt.kind, receipt.verified, receipt.findings) == (receipt.kind, True, [])


def test_n1_a_run_stops_after_its_time_budget(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Other work gets the worker between runs: past the budget a run queues the rest."""
    owner = Scope(T, "budgeted")
    _large(memory, monkeypatch, owner)
    monkeypatch.setattr(receipt_job, "BUDGET_S", 0.0)  # spent after the first receipt
    ids = []
    for _ in range(3):  # conversation deletions: each has its own scan
        cid = memory.conversations.create(owner).id
        ids.append(memory.conversations.delete(owner, cid).id)
    assert memory.jobs.run_pending([VERIFY_JOB], max_jobs=1) == 1
    assert [memory.receipts.get(owner, rid).verified for rid in ids] == [True, None, None]
    assert _jobs(memory, VERIFY_JOB) == [T]
    assert memory.jobs.run_pending([VERIFY_JOB]) == 2
    assert {memory.receipts.get(owner, rid).verified for rid in ids} == {True}


def test_n1_fact_deletions_of_one_owner_share_a_scan_and_a_leftover_is_told_apart(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    owner = Scope(T, "shared-scan")
    _large(memory, monkeypatch, owner)
    _later_table(memory)
    facts = [memory.facts.add(owner, f"s{i}").id for i in range(4)]
    receipts = [memory.facts.delete(owner, fid).id for fid in facts]
    _note(memory, T, owner.user, f"still names {facts[2]}")
    assert memory.jobs.run_pending([VERIFY_JOB]) >= 1
    got = [memory.receipts.get(owner, rid) for rid in receipts]
    assert [r.verified for r in got] == [True, True, False, True]
    assert got[2].findings == ["later_notes.note: 1 rows contain a deleted id"]
