"""Deleting one message alone (``mode="splice"``, n8n's ``deleteMessages``): its children
move to its parent, and everything stored along the paths under it stays exact."""

from __future__ import annotations

from functools import partial

import pytest

from memstrata import Memory, Scope
from memstrata.conversation.branches import branch_of, labels_of
from memstrata.errors import InvalidInput, NotFound
from memstrata.storage.plan import read
from memstrata.testing.conformance import fresh_scope


def _tree(mem: Memory, s: Scope) -> tuple[str, dict[str, str]]:
    """sys -> q1 -> a1 -> q2 -> {a2, a2'} ; a2 -> q3 ; a2' -> q3' (a regeneration)."""
    cid = mem.conversations.create(s).id
    ids: dict[str, str] = {}

    def add(name: str, role: str, parent: str | None = "") -> None:
        extra = {} if parent == "" else {"parent_id": ids[parent] if parent else None}
        ids[name] = mem.messages.append(s, cid, role=role, content=f"{name} text", **extra).id

    add("sys", "system", None)
    add("q1", "user")
    add("a1", "assistant")
    add("q2", "user")
    add("a2", "assistant")
    add("q3", "user")
    add("a2b", "assistant", "q2")
    add("q3b", "user", "a2b")
    return cid, ids


def _check_paths(mem: Memory, s: Scope, cid: str) -> None:
    """Depths, branch totals and ancestry labels agree with the parent links, on every branch."""
    every = mem.messages.list(s, cid, limit=500).items
    engine = mem.core.engine
    labels = engine.run(read(lambda: labels_of(cid, [m.id for m in every])))
    for leaf in mem.messages.leaves(s, cid).items:
        path = mem.messages.path(s, cid, leaf.id)
        assert [m.depth for m in path] == list(range(len(path)))
        assert path[0].parent_id is None
        total = 0
        for m in path:
            total += m.token_count
            assert m.branch_tokens == total
        branch = engine.run(read(partial(branch_of, cid, leaf.id)))
        assert branch is not None
        on_path = {m.id for m in path}
        for m in every:
            chain, depth = labels[m.id]
            assert branch.contains(chain, depth) == (m.id in on_path), (leaf.content, m.content)


def test_splice_removes_one_message_and_keeps_its_children(memory: Memory):
    s = fresh_scope()
    cid, ids = _tree(memory, s)
    before = memory.conversations.get(s, cid)
    receipt = memory.messages.delete(s, cid, ids["a1"], mode="splice")
    assert receipt.kind == "message"
    with pytest.raises(NotFound):
        memory.messages.get(s, cid, ids["a1"])
    assert memory.messages.get(s, cid, ids["q2"]).parent_id == ids["q1"]
    path = [m.content for m in memory.messages.path(s, cid)]
    assert path == ["sys text", "q1 text", "q2 text", "a2b text", "q3b text"]
    conv = memory.conversations.get(s, cid)
    assert conv.active_leaf_id == before.active_leaf_id
    assert conv.message_count == before.message_count - 1
    _check_paths(memory, s, cid)


@pytest.mark.parametrize("name", ["sys", "q2", "a2", "a2b", "q3b"])
def test_splice_anywhere_keeps_every_branch_exact(memory: Memory, name: str):
    s = fresh_scope()
    cid, ids = _tree(memory, s)
    memory.messages.delete(s, cid, ids[name], mode="splice")
    left = {m.id for m in memory.messages.list(s, cid).items}
    assert left == set(ids.values()) - {ids[name]}
    _check_paths(memory, s, cid)
    # Appends after a splice are labelled from the new shape.
    leaf = memory.messages.leaves(s, cid).items[0]
    memory.messages.append(s, cid, role="assistant", content="later", parent_id=leaf.id)
    memory.messages.append(s, cid, role="assistant", content="again", parent_id=leaf.id)
    _check_paths(memory, s, cid)


def test_splices_in_a_row_and_history(memory: Memory):
    s = fresh_scope()
    cid, ids = _tree(memory, s)
    for name in ("a2b", "q2", "sys"):
        memory.messages.delete(s, cid, ids[name], mode="splice")
        _check_paths(memory, s, cid)
    history = memory.history(s, cid, leaf_id=ids["q3b"])
    assert [m.content for m in history.messages] == ["q1 text", "a1 text", "q3b text"]


def test_splice_of_a_leaf_moves_the_active_leaf_and_a_bad_mode_is_refused(memory: Memory):
    s = fresh_scope()
    cid, ids = _tree(memory, s)
    with pytest.raises(InvalidInput):
        memory.messages.delete(s, cid, ids["q3b"], mode="children")
    memory.messages.delete(s, cid, ids["q3b"], mode="splice")
    assert memory.conversations.get(s, cid).active_leaf_id == ids["a2b"]
    with pytest.raises(NotFound):
        memory.messages.delete(fresh_scope(), cid, ids["a2b"], mode="splice")
