"""n8n's memory semantics, made exact (one test per behaviour)."""

from __future__ import annotations

from pathlib import Path

import pytest

from longterm_support import rule_extractor
from memstrata import Memory, Scope
from memstrata.config import Settings
from memstrata.errors import Conflict, NotFound
from memstrata.storage.plan import Op, Query, read
from memstrata.testing import FakeEmbedder, FakeLLM
from memstrata.testing.conformance import fresh_scope
from support import Models


def _talk(mem: Memory, scope: Scope, cid: str, *pairs: tuple[str, str]) -> list[str]:
    ids = []
    for q, a in pairs:
        ids.append(mem.messages.append(scope, cid, role="user", content=q).id)
        ids.append(mem.messages.append(scope, cid, role="assistant", content=a).id)
    return ids


def test_a_message_is_found_by_id_alone_within_its_scope(memory: Memory):
    s = fresh_scope()
    cid = memory.conversations.create(s).id
    q, _ = _talk(memory, s, cid, ("where?", "here"))
    found = memory.messages.find(s, q)
    assert (found.id, found.conversation_id, found.content) == (q, cid, "where?")
    for other in (fresh_scope(), Scope(s.tenant, s.user, "an-agent")):
        with pytest.raises(NotFound):
            memory.messages.find(other, q)
    with pytest.raises(NotFound):
        memory.messages.find(s, "not-an-id")
    # Ids are unique per conversation: one used twice in the scope must be told apart.
    second = memory.conversations.create(s).id
    memory.messages.append(s, second, role="user", content="again", id=q)
    with pytest.raises(Conflict):
        memory.messages.find(s, q)


def test_delete_message_removes_its_subtree_and_moves_the_active_leaf(memory: Memory):
    s = fresh_scope()
    cid = memory.conversations.create(s).id
    q1, a1, q2, a2 = _talk(memory, s, cid, ("one?", "1"), ("two?", "2"))
    regen = memory.messages.append(s, cid, role="assistant", content="2 again", parent_id=q2).id
    follow = memory.messages.append(s, cid, role="user", content="three?").id
    memory.messages.delete(s, cid, q2)  # the question, its two answers and the follow-up
    left = [m.id for m in memory.messages.list(s, cid).items]
    assert left == [q1, a1]
    for gone in (q2, a2, regen, follow):
        with pytest.raises(NotFound):
            memory.messages.get(s, cid, gone)
    conv = memory.conversations.get(s, cid)
    assert conv.active_leaf_id == a1  # the deleted message's parent
    assert conv.message_count == 2
    assert [m.content for m in memory.history(s, cid).messages] == ["one?", "1"]
    # Appending after the delete continues from the parent.
    nxt = memory.messages.append(s, cid, role="user", content="again?")
    assert nxt.parent_id == a1


def test_delete_message_off_the_active_branch_keeps_the_active_leaf(memory: Memory):
    s = fresh_scope()
    cid = memory.conversations.create(s).id
    q1, a1 = _talk(memory, s, cid, ("one?", "1"))
    other = memory.messages.append(s, cid, role="assistant", content="uno", parent_id=q1).id
    memory.conversations.set_active_leaf(s, cid, a1)
    memory.messages.delete(s, cid, other)
    assert memory.conversations.get(s, cid).active_leaf_id == a1
    assert [m.id for m in memory.messages.leaves(s, cid).items] == [a1]


def test_delete_root_moves_the_active_leaf_to_the_newest_remaining_leaf(memory: Memory):
    s = fresh_scope()
    cid = memory.conversations.create(s).id
    first = _talk(memory, s, cid, ("one?", "1"))
    second_root = memory.messages.append(s, cid, role="user", content="new root", parent_id=None)
    memory.messages.delete(s, cid, second_root.id)
    assert memory.conversations.get(s, cid).active_leaf_id == first[-1]
    memory.messages.delete(s, cid, first[0])
    conv = memory.conversations.get(s, cid)
    assert (conv.active_leaf_id, conv.message_count) == (None, 0)


def test_delete_message_is_not_found_in_another_conversation_or_scope(memory: Memory):
    s, other = fresh_scope(), fresh_scope()
    cid = memory.conversations.create(s).id
    (q,) = _talk(memory, s, cid, ("one?", "1"))[:1]
    elsewhere = memory.conversations.create(s).id
    with pytest.raises(NotFound):
        memory.messages.delete(s, elsewhere, q)
    with pytest.raises(NotFound):
        memory.messages.delete(other, cid, q)
    with pytest.raises(NotFound):
        memory.messages.delete(s, cid, "not-an-id")
    assert memory.messages.get(s, cid, q).content == "one?"


def test_delete_message_leaves_recall(memory: Memory):
    memory.core.recall.use(FakeEmbedder(64))
    s = fresh_scope()
    cid = memory.conversations.create(s).id
    q, _a = _talk(memory, s, cid, ("my parrot is called zanzibarquill", "noted"))
    assert q in [h.message.id for h in memory.recall.search(s, "zanzibarquill")]
    vectors = "SELECT count(*) FROM vectors WHERE message_id = ?"
    assert memory.core.engine.run(read(lambda: _count(vectors, q))) == 1
    memory.messages.delete(s, cid, q)
    assert q not in [h.message.id for h in memory.recall.search(s, "zanzibarquill parrot")]
    assert memory.core.engine.run(read(lambda: _count(vectors, q))) == 0
    docs = "SELECT count(*) FROM recall_docs WHERE message_id = ?"
    assert memory.core.engine.run(read(lambda: _count(docs, q))) == 0


def _count(sql: str, *params: object) -> Op[int]:
    rows = yield Query(sql, params)
    return int(rows[0][0])


def test_delete_message_drops_it_from_facts_provenance(memory: Memory, models: Models):
    models(memory, facts_llm=FakeLLM(rule_extractor), facts_embedder=None)
    s = fresh_scope()
    cid = memory.conversations.create(s).id
    kept = _talk(memory, s, cid, ("I like green tea.", "Noted!"))
    memory.longterm.flush(s, cid)
    [fact] = memory.facts.list(s).items
    assert [x.message_id for x in fact.sources] == [kept[0]]
    memory.messages.delete(s, cid, kept[0])
    # Its only source is gone: an extracted fact with no source left is erased.
    assert memory.facts.list(s, status="all").items == []


def test_delete_message_invalidates_a_summary_covering_it(tmp_path: Path):
    mem = Memory.open(
        f"sqlite:///{(tmp_path / 'm.db').as_posix()}",
        settings=Settings(home=tmp_path, worker="off"),
    )
    with mem:
        s = fresh_scope()
        cid = mem.conversations.create(s).id
        ids = _talk(mem, s, cid, *[(f"question {i} " * 20, f"answer {i} " * 20) for i in range(20)])
        assert mem.compact(s, cid).outcome == "compacted"
        summary = mem.compaction.summary(s, cid)
        # A message after the cover point leaves the summary alone.
        mem.messages.delete(s, cid, ids[-2])
        assert mem.compaction.summary(s, cid).id == summary.id
        covered = ids.index(summary.up_to_id)
        mem.messages.delete(s, cid, ids[covered - 1])
        with pytest.raises(NotFound):
            mem.compaction.summary(s, cid)
        assert mem.context(s, cid, budget=100_000).report.summary_id is None


@pytest.fixture
def mem(tmp_path: Path):
    m = Memory.open(
        f"sqlite:///{(tmp_path / 'm.db').as_posix()}",
        settings=Settings(home=tmp_path, worker="off"),
    )
    m.core.recall.tier.k = 0
    yield m
    m.close()


def _block(ctx, tag: str) -> str | None:
    found = [m["content"] for m in ctx.messages if m["content"].startswith(f"<{tag}>")]
    return found[0] if found else None


def test_iterations_tier_briefs_the_recent_failed_attempts_of_a_named_task(mem: Memory):
    s = fresh_scope()
    cid = mem.conversations.create(s).id
    _talk(mem, s, cid, ("deploy it", "trying"))
    for i in range(7):
        mem.iterations.append(s, cid, "deploy", outcome="failed", error=f"port {8000 + i} busy")
    mem.iterations.append(s, cid, "deploy", outcome="success")
    mem.iterations.append(s, cid, "other", outcome="failed", error="unrelated failure")
    # Off unless a task is named.
    assert _block(mem.context(s, cid), "failed-attempts") is None
    ctx = mem.context(s, cid, task="deploy")
    block = _block(ctx, "failed-attempts")
    assert block is not None
    lines = block.splitlines()[1:-1]
    # The five newest failures, oldest first; the success and the other task stay out.
    assert [line.split(":", 1)[0].split(" (")[0] for line in lines] == [
        f"Attempt {n} of task 'deploy'" for n in range(3, 8)
    ]
    assert "port 8006 busy" in lines[-1]
    assert "unrelated" not in block
    report = ctx.report.tiers["iterations"]
    assert report.items == 5
    assert report.granted > 0
    # Capped: a small cap keeps the newest whole attempts only.
    assert mem.context(s, cid, task="nothing-logged").report.tiers["iterations"].items == 0


def test_iterations_tier_is_capped(mem: Memory):
    s = fresh_scope()
    cid = mem.conversations.create(s).id
    _talk(mem, s, cid, ("go", "ok"))
    for _ in range(5):
        mem.iterations.append(s, cid, "t", outcome="error", error="x " * 2000)
    ctx = mem.context(s, cid, task="t")
    assert 0 < ctx.report.tiers["iterations"].granted <= 1000
    assert any(d["tier"] == "iterations" for d in ctx.report.dropped)


def test_user_and_conversation_working_memory_are_both_injected_and_labelled(mem: Memory):
    s = fresh_scope()
    cid = mem.conversations.create(s).id
    _talk(mem, s, cid, ("hi", "hello"))
    mem.working.put(s, "Name: Ana. Vegetarian.")
    assert "Name: Ana" in (_block(mem.context(s, cid), "working-memory") or "")
    mem.working.put(s, "Trip to Oslo in May.", conversation_id=cid)
    block = _block(mem.context(s, cid), "working-memory") or ""
    user_at = block.index("User working memory")
    conv_at = block.index("Conversation working memory")
    assert user_at < block.index("Name: Ana") < conv_at < block.index("Trip to Oslo")
    # Another conversation of the user sees the user's document only.
    other = mem.conversations.create(s).id
    _talk(mem, s, other, ("hey", "hey"))
    block = _block(mem.context(s, other), "working-memory") or ""
    assert "Name: Ana" in block
    assert "Oslo" not in block
