"""No queued job keeps a deleted message's id, so the deletion's receipt verifies; a
compaction or extraction up to a deleted leaf stays queued for the active leaf (the rest of
the conversation still needs it), and a job naming the id elsewhere in its payload goes."""

from __future__ import annotations

from memstrata import Memory, Scope
from memstrata.domain.jobs import Job
from memstrata.testing.conformance import fresh_scope


def extractions(memory: Memory, scope: Scope) -> list[Job]:
    jobs = memory.jobs.list(tenant=scope.tenant, user=scope.user).items
    return [j for j in jobs if j.kind == "longterm.extract"]


def test_a_queued_compaction_of_a_deleted_leaf_follows_the_active_leaf(memory: Memory) -> None:
    scope = fresh_scope()
    conv = memory.conversations.create(scope)
    q = memory.messages.append(scope, conv.id, role="user", content="first question")
    a = memory.messages.append(scope, conv.id, role="assistant", content="first answer")
    b = memory.messages.append(scope, conv.id, role="assistant", content="other", parent_id=q.id)
    queued = memory.compaction.schedule(scope, conv.id, leaf_id=a.id, delay_s=3600)
    receipt = memory.messages.delete(scope, conv.id, a.id)
    assert receipt.verified is not False, receipt.findings
    jobs = {j.id: j for j in memory.jobs.list(tenant=scope.tenant).items}
    assert jobs[queued.id].payload == {"leaf_id": None}  # the active leaf when it runs
    # A job about a message still there is left alone.
    kept = memory.compaction.schedule(scope, conv.id, leaf_id=b.id, delay_s=3600)
    assert kept.id == queued.id  # one compaction waits per conversation: merged
    assert memory.jobs.get(kept.id, tenant=scope.tenant).payload == {"leaf_id": b.id}


def test_a_queued_extraction_keeps_the_rest_of_the_conversation(memory: Memory) -> None:
    memory.longterm.kit.capture = True  # appends queue the conversation's extraction
    scope = fresh_scope()
    conv = memory.conversations.create(scope)
    memory.messages.append(scope, conv.id, role="user", content="I moved to Lisbon in May.")
    last = memory.messages.append(scope, conv.id, role="user", content="Also, I adopted a cat.")
    queued = extractions(memory, scope)
    assert [j.payload for j in queued] == [{"leaf_id": last.id}]
    memory.messages.delete(scope, conv.id, last.id)
    (job,) = extractions(memory, scope)
    assert job.id == queued[0].id
    assert job.payload == {"leaf_id": None}


def test_a_job_naming_a_deleted_message_elsewhere_goes(memory: Memory) -> None:
    scope = fresh_scope()
    conv = memory.conversations.create(scope)
    m = memory.messages.append(scope, conv.id, role="user", content="hello")
    other = memory.messages.append(scope, conv.id, role="user", content="again", parent_id=None)
    about = memory.jobs.enqueue(
        scope, "custom.notify", payload={"about": [m.id]}, conversation_id=conv.id, delay_s=3600
    )
    both = memory.jobs.enqueue(
        scope,
        "custom.reply",
        payload={"leaf_id": m.id, "quote": m.id},
        conversation_id=conv.id,
        delay_s=3600,
    )
    untouched = memory.jobs.enqueue(
        scope, "custom.notify", payload={"about": [other.id]}, conversation_id=conv.id, delay_s=3600
    )
    receipt = memory.messages.delete(scope, conv.id, m.id)
    assert receipt.verified is not False, receipt.findings
    ids = {j.id for j in memory.jobs.list(tenant=scope.tenant, user=scope.user).items}
    assert about.id not in ids
    assert both.id not in ids
    assert untouched.id in ids


def test_a_finished_job_keeps_its_record_but_not_the_id(memory: Memory) -> None:
    """A job that ran up to a message that is later deleted: the receipt verifies (it said
    ``jobs.payload: 1 rows contain a deleted id``), and the job's record stays."""
    memory.jobs.register("custom.upto", lambda job, m: None)
    memory.jobs.register("custom.about", lambda job, m: None)
    scope = fresh_scope()
    conv = memory.conversations.create(scope)
    memory.messages.append(scope, conv.id, role="user", content="hello there")
    m = memory.messages.append(scope, conv.id, role="assistant", content="hi")
    upto = memory.jobs.enqueue(
        scope, "custom.upto", payload={"leaf_id": m.id}, conversation_id=conv.id
    )
    about = memory.jobs.enqueue(scope, "custom.about", payload={"m": m.id}, conversation_id=conv.id)
    assert memory.jobs.run_pending(["custom.upto", "custom.about"]) == 2
    receipt = memory.messages.delete(scope, conv.id, m.id)
    assert receipt.verified is True, receipt.findings
    jobs = {j.id: j for j in memory.jobs.list(tenant=scope.tenant, user=scope.user).items}
    assert jobs[upto.id].status.value == "done"
    assert jobs[upto.id].payload == {"leaf_id": None}
    assert about.id not in jobs
