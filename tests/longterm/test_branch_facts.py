"""Facts follow the branches they came from, on every backend: a fact whose every source
message is off its conversation's active branch (edited away, regenerated away, under a
deleted message) is withdrawn (superseded, reason ``branch_abandoned``, in its history),
kept out of the context, and restored when its branch is active again."""

from __future__ import annotations

from longterm_support import rule_extractor
from memstrata import Memory, Scope
from memstrata.longterm import FactStatus
from memstrata.longterm.branchfacts import BRANCH_ABANDONED, RESTORED
from memstrata.longterm.model import Fact
from memstrata.storage.plan import Exec, Op, write
from memstrata.testing import FakeLLM
from memstrata.testing.conformance import fresh_scope
from support import Models


def _setup(models: Models, mem: Memory) -> None:
    models(mem, facts_llm=FakeLLM(rule_extractor), facts_embedder=None)


def _facts(mem: Memory, scope: Scope) -> dict[str, Fact]:
    return {f.content: f for f in mem.facts.list(scope, status=None, limit=500).items}


def _memory_block(mem: Memory, scope: Scope) -> str:
    c = mem.conversations.create(scope)
    mem.messages.append(scope, c.id, role="user", content="Which birds do I like?")
    ctx = mem.context(scope, c.id, budget=3000)
    return "\n".join(m["content"] for m in ctx.messages if m["role"] == "system")


def test_an_edited_away_fact_is_withdrawn_and_restored_with_its_branch(
    memory: Memory, models: Models
) -> None:
    _setup(models, memory)
    s = fresh_scope()
    c = memory.conversations.create(s)
    owls_q = memory.messages.append(s, c.id, role="user", content="I like owls")
    owls_a = memory.messages.append(s, c.id, role="assistant", content="Noted.")
    memory.longterm.flush(s, c.id)
    assert _facts(memory, s)["User likes owls"].status is FactStatus.ACTIVE
    assert "User likes owls" in _memory_block(memory, s)

    # The question is edited: the first branch, and the fact drawn from it, are left.
    memory.messages.append(s, c.id, role="user", content="I like hawks", parent_id=None)
    hawks_a = memory.messages.append(s, c.id, role="assistant", content="Noted.")
    memory.longterm.flush(s, c.id)
    owls = _facts(memory, s)["User likes owls"]
    assert owls.status is FactStatus.SUPERSEDED
    assert owls.reason == BRANCH_ABANDONED
    assert owls.superseded_by is None
    assert owls.superseded_at is not None
    assert _facts(memory, s)["User likes hawks"].status is FactStatus.ACTIVE
    events = [(e.event, e.reason) for e in memory.facts.history(s, owls.id)]
    assert events[-1] == ("superseded", BRANCH_ABANDONED)
    block = _memory_block(memory, s)
    assert "User likes owls" not in block
    assert "User likes hawks" in block

    # The first branch made active again: its fact is back, the other one withdrawn.
    memory.conversations.set_active_leaf(s, c.id, owls_a.id)
    facts = _facts(memory, s)
    assert facts["User likes owls"].status is FactStatus.ACTIVE
    assert facts["User likes owls"].reason is None
    assert facts["User likes owls"].superseded_at is None
    assert facts["User likes hawks"].status is FactStatus.SUPERSEDED
    assert facts["User likes hawks"].reason == BRANCH_ABANDONED
    events = [(e.event, e.reason) for e in memory.facts.history(s, owls.id)]
    assert events[-2:] == [("superseded", BRANCH_ABANDONED), ("restored", RESTORED)]
    block = _memory_block(memory, s)
    assert "User likes owls" in block
    assert "User likes hawks" not in block

    # Deleting the active branch moves the leaf back to the other one: it follows.
    memory.messages.delete(s, c.id, owls_q.id)
    assert memory.conversations.get(s, c.id).active_leaf_id == hawks_a.id
    facts = _facts(memory, s)
    assert "User likes owls" not in facts  # its only source is gone: erased
    assert facts["User likes hawks"].status is FactStatus.ACTIVE


def test_a_fact_drawn_from_a_left_branch_is_withdrawn_at_once(
    memory: Memory, models: Models
) -> None:
    """An extraction that read a branch left before it landed (here: asked for an old
    leaf) leaves no active fact behind."""
    _setup(models, memory)
    s = fresh_scope()
    c = memory.conversations.create(s)
    old = memory.messages.append(s, c.id, role="user", content="I like ravens")
    memory.messages.append(s, c.id, role="user", content="I like crows", parent_id=None)
    memory.longterm.flush(s, c.id, leaf_id=old.id)
    ravens = _facts(memory, s)["User likes ravens"]
    assert ravens.status is FactStatus.SUPERSEDED
    assert ravens.reason == BRANCH_ABANDONED


def test_the_setting_off_leaves_facts_as_extracted(memory: Memory, models: Models) -> None:
    _setup(models, memory)
    memory.longterm.kit.branch_withdraw = False
    s = fresh_scope()
    c = memory.conversations.create(s)
    memory.messages.append(s, c.id, role="user", content="I like owls")
    memory.longterm.flush(s, c.id)
    memory.messages.append(s, c.id, role="user", content="I like hawks", parent_id=None)
    assert _facts(memory, s)["User likes owls"].status is FactStatus.ACTIVE


def _add_source(mem: Memory, fact_id: str, conversation_id: str, message_id: str) -> None:
    """Provenance as a model's merge of two facts leaves it: one more source."""

    def op() -> Op[None]:
        yield Exec(
            "INSERT INTO fact_sources (fact_id, conversation_id, message_id) VALUES (?, ?, ?)",
            (fact_id, conversation_id, message_id),
        )

    mem.core.engine.run(write(op))


def test_a_fact_from_two_conversations_follows_the_one_left(memory: Memory, models: Models) -> None:
    """A fact drawn from two conversations stands while either source is on an active
    branch; once the conversation holding the live one is deleted, the other decides."""
    _setup(models, memory)
    s = fresh_scope()
    a = memory.conversations.create(s)
    memory.messages.append(s, a.id, role="user", content="I like green owls")
    memory.longterm.flush(s, a.id)
    [fact] = memory.facts.list(s).items
    b = memory.conversations.create(s)
    also = memory.messages.append(s, b.id, role="user", content="Green owls, yes")
    _add_source(memory, fact.id, b.id, also.id)
    # Its source in the first conversation is edited away: the second still holds it.
    memory.messages.append(s, a.id, role="user", content="Tell me about hawks", parent_id=None)
    assert memory.facts.get(s, fact.id).status is FactStatus.ACTIVE
    memory.conversations.delete(s, b.id)
    gone = memory.facts.get(s, fact.id)
    assert gone.status is FactStatus.SUPERSEDED
    assert gone.reason == BRANCH_ABANDONED
