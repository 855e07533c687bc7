"""A queued job whose payload names a deleted message goes with it, so the deletion's
receipt verifies (no job row keeps the id); jobs naming other messages stay."""

from __future__ import annotations

from memstrata import Memory
from memstrata.testing.conformance import fresh_scope


def test_a_queued_compaction_of_a_deleted_leaf_goes_with_it(memory: Memory) -> None:
    scope = fresh_scope()
    conv = memory.conversations.create(scope)
    q = memory.messages.append(scope, conv.id, role="user", content="first question")
    a = memory.messages.append(scope, conv.id, role="assistant", content="first answer")
    b = memory.messages.append(scope, conv.id, role="assistant", content="other", parent_id=q.id)
    doomed = memory.compaction.schedule(scope, conv.id, leaf_id=a.id, delay_s=3600)
    receipt = memory.messages.delete(scope, conv.id, a.id)
    assert receipt.verified is not False, receipt.findings
    ids = {j.id for j in memory.jobs.list(tenant=scope.tenant).items}
    assert doomed.id not in ids
    # A job about a message still there is left alone.
    kept = memory.compaction.schedule(scope, conv.id, leaf_id=b.id, delay_s=3600)
    assert kept.id in {j.id for j in memory.jobs.list(tenant=scope.tenant).items}
