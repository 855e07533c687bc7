"""Prompt provenance on every backend: a recorded context, its link to the reply, what
the reply's provenance and a fact's usage answer, and what deletions leave behind."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from memstrata import Memory, Scope
from memstrata.errors import Conflict, InvalidInput, NotFound
from memstrata.provenance import entries

S = Scope("t1", "alice")
OTHER = Scope("t1", "bob")


def _conversation(memory: Memory, scope: Scope = S) -> str:
    cid = memory.conversations.create(scope).id
    memory.messages.append(scope, cid, role="system", content="You are brief.")
    memory.messages.append(scope, cid, role="user", content="Which tea do I like?")
    return cid


def _rows(memory: Memory, sql: str, *params: object) -> list[tuple[object, ...]]:
    from memstrata.storage.plan import Query, read

    def op():  # type: ignore[no-untyped-def]
        return (yield Query(sql, params))

    return [tuple(r) for r in memory.core.engine.run(read(op))]


def test_a_recorded_context_linked_to_a_reply_returns_exactly_the_injected_ids(
    memory: Memory,
) -> None:
    cid = _conversation(memory)
    fact = memory.facts.add(S, "Likes green tea", category="preference")
    memory.working.put(S, "prefers short answers")
    memory.plans.put(S, cid, {"steps": ["answer"]})
    ctx = memory.context(S, cid, record=True)
    assert ctx.context_id is not None
    reply = memory.messages.append(
        S, cid, role="assistant", content="Green tea.", context_id=ctx.context_id
    )
    prov = memory.provenance.get(S, cid, reply.id)
    assert prov.record is not None
    record = prov.record
    assert record.id == ctx.context_id
    assert record.reply_id == reply.id
    assert record.leaf_id == ctx.report.leaf_id
    assert record.budget == 8000
    injected = {(e.tier, e.kind, e.item_id) for e in entries(cid, ctx)}
    stored = {(i.tier, i.kind, i.id) for i in record.items}
    assert stored == injected
    # The injected ids are the context's own: its system run, window, fact, working memory, plan.
    expected_messages = {m.id for m in (*ctx.system, *ctx.window)}
    assert {i.id for i in record.items if i.kind == "message"} == expected_messages
    (fact_item,) = [i for i in record.items if i.kind == "fact"]
    assert fact_item.id == fact.id
    assert fact_item.state == "active"
    from memstrata.storage.records import to_micros

    assert fact_item.version == to_micros(fact.updated_at)
    kinds = {i.kind for i in record.items}
    assert {"working", "plan"} <= kinds
    assert all(i.state == "present" for i in record.items if i.kind == "message")
    assert record.report["hash"] == ctx.report.hash
    assert "Likes green tea" not in json.dumps(record.to_dict())


def test_unrecorded_context_has_no_id_and_a_reply_without_link_has_no_record(
    memory: Memory,
) -> None:
    cid = _conversation(memory)
    ctx = memory.context(S, cid)
    assert ctx.context_id is None
    reply = memory.messages.append(S, cid, role="assistant", content="Hm.")
    assert memory.provenance.get(S, cid, reply.id).record is None
    assert _rows(memory, "SELECT count(*) FROM context_records")[0][0] == 0


def test_facts_usage_lists_the_reply_and_counts(memory: Memory) -> None:
    cid = _conversation(memory)
    fact = memory.facts.add(S, "Likes green tea", category="preference")
    ctx = memory.context(S, cid, record=True)
    reply = memory.messages.append(
        S, cid, role="assistant", content="Green tea.", context_id=ctx.context_id
    )
    page = memory.provenance.fact_usage(S, fact.id)
    assert [(u.conversation_id, u.message_id, u.context_id) for u in page.items] == [
        (cid, reply.id, ctx.context_id)
    ]
    assert page.next_cursor is None
    # An unlinked record counts as a use too (the prompt held the fact).
    memory.context(S, cid, record=True)
    assert memory.provenance.fact_use_counts(S, [fact.id, "unknown"]) == {fact.id: 2}
    assert memory.core.fact_usage is not None
    # Another user sees none of it.
    with pytest.raises(NotFound):
        memory.provenance.fact_usage(OTHER, fact.id)
    assert memory.provenance.fact_use_counts(OTHER, [fact.id]) == {}


def test_fact_usage_pages(memory: Memory) -> None:
    fact = memory.facts.add(S, "Likes green tea", category="preference")
    replies = []
    for _ in range(3):
        cid = _conversation(memory)
        ctx = memory.context(S, cid, record=True)
        replies.append(
            memory.messages.append(
                S, cid, role="assistant", content="ok", context_id=ctx.context_id
            ).id
        )
    first = memory.provenance.fact_usage(S, fact.id, limit=2)
    assert first.next_cursor is not None
    rest = memory.provenance.fact_usage(S, fact.id, limit=2, cursor=first.next_cursor)
    assert [u.message_id for u in [*first.items, *rest.items]] == replies[::-1]


def test_the_link_is_idempotent_and_exclusive(memory: Memory) -> None:
    cid = _conversation(memory)
    ctx = memory.context(S, cid, record=True)
    assert ctx.context_id is not None
    mid = "01900000-0000-7000-8000-000000000001"
    reply, created = memory.messages.put(
        S, cid, id=mid, role="assistant", content="Green.", context_id=ctx.context_id
    )
    assert created
    again, created = memory.messages.put(
        S, cid, id=mid, role="assistant", content="Green.", context_id=ctx.context_id
    )
    assert not created
    assert again.id == reply.id
    # The record is taken: another reply cannot claim it, and nothing is stored.
    before = len(memory.messages.list(S, cid).items)
    with pytest.raises(Conflict):
        memory.messages.append(
            S, cid, role="assistant", content="Other.", context_id=ctx.context_id
        )
    assert len(memory.messages.list(S, cid).items) == before
    # The reply is taken too: a second record cannot be linked to it.
    second = memory.context(S, cid, record=True)
    with pytest.raises(Conflict):
        memory.messages.put(
            S, cid, id=mid, role="assistant", content="Green.", context_id=second.context_id
        )


def test_an_invalid_link_stores_no_message(memory: Memory) -> None:
    cid = _conversation(memory)
    other_cid = _conversation(memory)
    ctx = memory.context(S, cid, record=True)
    bob_cid = _conversation(memory, OTHER)
    bob_ctx = memory.context(OTHER, bob_cid, record=True)
    count = len(memory.messages.list(S, cid).items)
    for bad in ("01900000-0000-7000-8000-00000000dead", "not-a-uuid", bob_ctx.context_id):
        with pytest.raises(NotFound):
            memory.messages.append(S, cid, role="assistant", content="x", context_id=bad)
    # A record of another conversation of the same user is not this conversation's.
    with pytest.raises(NotFound):
        memory.messages.append(
            S, other_cid, role="assistant", content="x", context_id=ctx.context_id
        )
    with pytest.raises(InvalidInput):
        memory.messages.append(S, cid, role="user", content="x", context_id=ctx.context_id)
    assert len(memory.messages.list(S, cid).items) == count
    assert (
        _rows(memory, "SELECT count(*) FROM context_records WHERE reply_id IS NOT NULL")[0][0] == 0
    )


def test_fact_deletion_leaves_a_tombstone_and_no_text(memory: Memory) -> None:
    cid = _conversation(memory)
    fact = memory.facts.add(S, "Canary-7f3a likes oolong", category="preference")
    ctx = memory.context(S, cid, record=True)
    reply = memory.messages.append(
        S, cid, role="assistant", content="ok", context_id=ctx.context_id
    )
    memory.facts.delete(S, fact.id)
    prov = memory.provenance.get(S, cid, reply.id)
    assert prov.record is not None
    (item,) = [i for i in prov.record.items if i.kind == "fact"]
    assert (item.id, item.state) == (fact.id, "deleted")
    # Its uses stay listed by id; its text is nowhere in the records.
    assert [u.message_id for u in memory.provenance.fact_usage(S, fact.id).items] == [reply.id]
    dump = json.dumps(_rows(memory, "SELECT * FROM context_records"), default=str)
    dump += json.dumps(_rows(memory, "SELECT * FROM context_record_items"), default=str)
    assert "Canary-7f3a" not in dump


def test_an_edited_fact_reads_as_changed(memory: Memory) -> None:
    cid = _conversation(memory)
    fact = memory.facts.add(S, "Likes green tea", category="preference")
    ctx = memory.context(S, cid, record=True)
    reply = memory.messages.append(
        S, cid, role="assistant", content="ok", context_id=ctx.context_id
    )
    memory.facts.edit(S, fact.id, content="Likes black tea")
    prov = memory.provenance.get(S, cid, reply.id)
    assert prov.record is not None
    assert [i.state for i in prov.record.items if i.kind == "fact"] == ["changed"]


def test_conversation_delete_removes_its_records(memory: Memory) -> None:
    cid = _conversation(memory)
    keep = _conversation(memory)
    ctx = memory.context(S, cid, record=True)
    memory.messages.append(S, cid, role="assistant", content="ok", context_id=ctx.context_id)
    memory.context(S, keep, record=True)
    memory.conversations.delete(S, cid)
    assert _rows(memory, "SELECT conversation_id FROM context_records") == [(keep,)]
    assert _rows(
        memory,
        "SELECT count(*) FROM context_record_items WHERE context_id = ?",
        ctx.context_id,
    ) == [(0,)]


def test_message_delete_takes_the_linked_record_and_tombstones_injected_ones(
    memory: Memory,
) -> None:
    cid = _conversation(memory)
    ctx = memory.context(S, cid, record=True)
    reply = memory.messages.append(
        S, cid, role="assistant", content="ok", context_id=ctx.context_id
    )
    memory.messages.append(S, cid, role="user", content="And coffee?")
    later = memory.context(S, cid, record=True)
    answer = memory.messages.append(
        S, cid, role="assistant", content="no", context_id=later.context_id
    )
    # The first reply goes (with the follow-ups under it, the tree's rule): its record goes.
    window = {i.id for i in memory.provenance.get(S, cid, answer.id).record.items}  # type: ignore[union-attr]
    assert reply.id in window
    memory.messages.delete(S, cid, reply.id)
    assert _rows(memory, "SELECT id FROM context_records WHERE id = ?", ctx.context_id) == []
    # The later record was linked to a deleted follow-up too: gone as well.
    assert _rows(memory, "SELECT count(*) FROM context_records")[0][0] == 0


def test_message_delete_tombstones_it_in_other_records(memory: Memory) -> None:
    cid = _conversation(memory)
    system, question = memory.messages.path(S, cid)
    ctx = memory.context(S, cid, record=True)
    # The reply sits on another branch (under the system message), so deleting the
    # question leaves it, and the record linked to it, in place.
    reply = memory.messages.append(
        S, cid, role="assistant", content="ok", parent_id=system.id, context_id=ctx.context_id
    )
    memory.messages.delete(S, cid, question.id)
    prov = memory.provenance.get(S, cid, reply.id)
    assert prov.record is not None
    states = {i.id: i.state for i in prov.record.items if i.kind == "message"}
    assert states == {system.id: "present", question.id: "deleted"}
    assert _rows(
        memory,
        "SELECT deleted FROM context_record_items WHERE context_id = ? AND item_id = ?",
        ctx.context_id,
        question.id,
    ) == [(1,)]


def test_user_delete_removes_records(memory: Memory) -> None:
    cid = _conversation(memory, OTHER)
    memory.context(OTHER, cid, record=True)
    mine = _conversation(memory)
    memory.context(S, mine, record=True)
    memory.users.delete(OTHER)
    assert _rows(memory, "SELECT user_id FROM context_records") == [("alice",)]
    assert _rows(
        memory,
        "SELECT count(*) FROM context_record_items i WHERE NOT EXISTS "
        "(SELECT 1 FROM context_records r WHERE r.id = i.context_id)",
    ) == [(0,)]


def test_the_setting_records_by_default(memory: Memory) -> None:
    cid = _conversation(memory)
    memory.core.settings.context_record = True
    try:
        assert memory.context(S, cid).context_id is not None
        assert memory.context(S, cid, record=False).context_id is None
    finally:
        memory.core.settings.context_record = False


def test_retention_kind_context_records(memory: Memory) -> None:
    cid = _conversation(memory)
    memory.context(S, cid, record=True)
    assert (
        memory.retention.apply(overrides={"context_records": 3600}, dry_run=True)["context_records"]
        == 0
    )
    counts = memory.retention.apply(overrides={"context_records": 0}, dry_run=True)
    assert counts["context_records"] == 1
    memory.retention.apply(overrides={"context_records": 0})
    assert _rows(memory, "SELECT count(*) FROM context_records")[0][0] == 0
    assert _rows(memory, "SELECT count(*) FROM context_record_items")[0][0] == 0
    # The conversation stays: only its records were past retention.
    assert memory.conversations.get(S, cid).id == cid


def test_a_user_export_carries_the_records(memory: Memory, tmp_path: Path) -> None:
    cid = _conversation(memory)
    memory.facts.add(S, "Likes green tea", category="preference")
    ctx = memory.context(S, cid, record=True)
    reply = memory.messages.append(
        S, cid, role="assistant", content="ok", context_id=ctx.context_id
    )
    lines: list[str] = []
    memory.transfer.export(lines.append, tenant="t1", user="alice")
    assert sum('"context_records"' in line for line in lines) >= 1
    target = Memory.open(f"sqlite:///{(tmp_path / 'copy.db').as_posix()}")
    try:
        target.transfer.import_(lines)
        assert target.provenance.get(S, cid, reply.id) == memory.provenance.get(S, cid, reply.id)
    finally:
        target.close()


def test_a_long_window_is_recorded_whole_in_order(memory: Memory) -> None:
    cid = memory.conversations.create(S).id
    for i in range(260):
        memory.messages.append(S, cid, role="user" if i % 2 == 0 else "assistant", content=f"m{i}")
    ctx = memory.context(S, cid, budget=1_000_000, record=True)
    assert ctx.context_id is not None
    record = memory.provenance.record_of(S, cid, ctx.context_id)
    assert [i.id for i in record.items] == [m.id for m in ctx.window]
    assert len(record.items) == 260
