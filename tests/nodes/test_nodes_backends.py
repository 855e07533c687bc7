"""Node memory's index table on every relational backend (the blobs stay on local files)."""

from __future__ import annotations

import pytest

from memstrata import Memory, NotFound, Scope

SCOPE = Scope("acme", "node-user")
IDS = [f"00000000-0000-7000-8000-{i:012d}" for i in range(1, 20)]


def test_turns_survive_reopen_and_follow_their_thread(memory: Memory) -> None:
    conv = memory.conversations.create(SCOPE)
    with memory.nodes.open(SCOPE, "app1", conv.id, "llm-1") as node:
        node.add_turn(IDS[0], None, user_content="first question", assistant_content="first answer")
        node.add_turn(
            IDS[1], IDS[0], user_content="second question", assistant_content="second answer"
        )
        node.add_turn(
            IDS[2], IDS[0], user_content="edited second", assistant_content="other answer"
        )
    node = memory.nodes.open(SCOPE, "app1", conv.id, "llm-1")
    history = node.history(IDS[1])
    contents = [m.content for m in history.messages]
    assert contents == ["first question", "first answer", "second question", "second answer"]
    other = memory.nodes.open(SCOPE, "app1", conv.id, "llm-2")
    assert other.history(IDS[1]).messages == []  # another node has its own memory


def test_other_scope_and_cascade(memory: Memory) -> None:
    conv = memory.conversations.create(SCOPE)
    with memory.nodes.open(SCOPE, "app1", conv.id, "n") as node:
        node.add_turn(IDS[0], None, user_content="secret", assistant_content="kept")
    with pytest.raises(NotFound):
        memory.nodes.open(Scope("acme", "intruder"), "app1", conv.id, "n").history(IDS[0])
    memory.conversations.delete(SCOPE, conv.id)
    with pytest.raises(NotFound):
        memory.nodes.open(SCOPE, "app1", conv.id, "n").history(IDS[0])
    again = memory.conversations.create(SCOPE, id=conv.id)  # the same id, a new conversation
    assert memory.nodes.open(SCOPE, "app1", again.id, "n").history(IDS[0]).messages == []


def test_clear_and_gc(memory: Memory) -> None:
    conv = memory.conversations.create(SCOPE)
    for node_id in ("a", "b"):
        with memory.nodes.open(SCOPE, "app1", conv.id, node_id) as node:
            node.add_turn(IDS[0], None, user_content="q", assistant_content="a")
    memory.nodes.open(SCOPE, "app1", conv.id, "a").clear()
    assert memory.nodes.open(SCOPE, "app1", conv.id, "a").history(IDS[0]).messages == []
    report = memory.nodes.gc(0.0)
    assert report.node_memories >= 1
    assert memory.nodes.open(SCOPE, "app1", conv.id, "b").history(IDS[0]).messages == []
