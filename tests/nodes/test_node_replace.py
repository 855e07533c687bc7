"""A turn added again with other content replaces the stored one (Dify overwrites), on the
memory, file and S3 stores: readers see the new text once in the old place, the node log
keeps the old text, reads stay bounded, scopes and nodes stay apart."""

from __future__ import annotations

import threading

import pytest

from memstrata import Memory, Scope
from memstrata.errors import NotFound
from memstrata.nodes import log
from memstrata.nodes.service import blobs_for

S = Scope("t1", "alice")
OTHER = Scope("t1", "bob")


def conv(mem: Memory, scope: Scope = S) -> str:
    return mem.conversations.create(scope).id


def contents(h) -> list[str]:
    return [m.content for m in h.messages]


def chain(node, n: int, prefix: str = "m") -> str:
    """``n`` turns, one flush each, each the parent of the next; returns the last id."""
    parent = None
    for i in range(n):
        node.add_turn(f"{prefix}{i}", parent, f"q{i}", assistant_content=f"a{i}")
        node.flush()
        parent = f"{prefix}{i}"
    assert parent is not None
    return parent


def test_replacement_is_shown_in_place_and_the_log_keeps_the_old_text(node_mem):
    cid = conv(node_mem)
    n = node_mem.nodes.open(S, "app", cid, "llm")
    last = chain(n, 4)
    n.add_turn("m1", "m0", "q1", assistant_content="a1, corrected")
    assert n.flush() == 1
    want = ["q0", "a0", "q1", "a1, corrected", "q2", "a2", "q3", "a3"]
    assert contents(n.history(last, max_tokens=None)) == want
    assert contents(n.history(max_tokens=None)) == want  # the newest turn is still m3
    assert contents(n.history("m1", max_tokens=None)) == want[:4]
    assert [t.assistant_content for t in n.message_log("m1")] == ["a1", "a1, corrected"]
    # Folded into one chunk, original and replacement read the same, and stay in the log.
    assert n.compact() == 5
    assert contents(n.history(last, max_tokens=None)) == want
    n.add_turn("m1", "m0", "q1", assistant_content="a1, third take")
    n.flush()
    assert contents(n.history(last, max_tokens=None))[3] == "a1, third take"
    assert [t.assistant_content for t in n.message_log("m1")] == [
        "a1",
        "a1, corrected",
        "a1, third take",
    ]
    # A reader counts the turns it shows: four, not six.
    prefix = segments(node_mem, n)[0].split("seg/")[0]
    assert blobs_for(node_mem.core).run(log.count_turns(prefix)) == 4


def segments(mem: Memory, node) -> list[str]:
    """The node's loose segment keys, oldest first (its one generation)."""
    k = node.key
    root = f"node_memory/{k.tenant}/{k.app_id}/{k.conversation_id}/{k.node_id}/"
    return sorted(m.key for m in blobs_for(mem.core).store.list_prefix(root) if "/seg/" in m.key)


def test_a_replay_writes_nothing(node_mem):
    cid = conv(node_mem)
    n = node_mem.nodes.open(S, "app", cid, "llm")
    chain(n, 2)
    store = blobs_for(node_mem.core).store
    before = sorted(m.key for m in store.list_prefix("node_memory/"))
    n.add_turn("m1", "m0", "q1", assistant_content="a1")
    assert n.flush() == 0
    assert sorted(m.key for m in store.list_prefix("node_memory/")) == before
    assert len(n.message_log("m1")) == 1


def test_replacing_an_old_turn_keeps_reads_bounded(node_mem):
    cid = conv(node_mem)
    n = node_mem.nodes.open(S, "app", cid, "llm")
    last = chain(n, 12)
    before = n.history(last, max_tokens=30)
    n.add_turn("m0", None, "q0", assistant_content="a0, corrected")
    n.flush()
    after = n.history(last, max_tokens=30)
    assert contents(after) == contents(before)
    # The replacement is one more object, read once; nothing older is read for it.
    assert after.objects_read == before.objects_read + 1
    full = n.history(last, max_tokens=None)
    assert contents(full)[:2] == ["q0", "a0, corrected"]
    assert len(full.turns) == 12


def test_loop_iterations_are_replaced_as_a_whole(node_mem):
    cid = conv(node_mem)
    n = node_mem.nodes.open(S, "app", cid, "llm")
    turns = [("m0", None, "q0", "a0"), ("m1", "m0", "try 1", "no"), ("m1", "m0", "try 2", "no")]
    for mid, parent, question, answer in [*turns, ("m2", "m1", "q2", "a2")]:
        n.add_turn(mid, parent, question, assistant_content=answer)
    n.flush()
    redo = node_mem.nodes.open(S, "app", cid, "llm")
    for i in range(3):
        redo.add_turn("m1", "m0", f"retry {i}", assistant_content="yes" if i == 2 else "no")
    assert redo.flush() == 3
    h = n.history("m2", max_tokens=None)
    assert contents(h) == [
        "q0",
        "a0",
        *("retry 0", "no", "retry 1", "no", "retry 2", "yes"),
        "q2",
        "a2",
    ]
    assert len(n.message_log("m1")) == 5


def test_a_replacement_whose_original_is_damaged_is_still_shown(node_mem):
    cid = conv(node_mem)
    n = node_mem.nodes.open(S, "app", cid, "llm")
    chain(n, 2)
    store = blobs_for(node_mem.core).store
    oldest = segments(node_mem, n)[0]
    n.add_turn("m0", None, "q0", assistant_content="a0, corrected")
    n.flush()
    whole = store.get(oldest).data
    store.put(oldest, whole[: len(whole) // 2])
    h = n.history(max_tokens=None, skip_damaged=True)
    assert contents(h) == ["q0", "a0, corrected", "q1", "a1"]
    assert h.damaged == [oldest]


def test_scopes_nodes_and_generations_stay_apart(node_mem):
    cid = conv(node_mem)
    a = node_mem.nodes.open(S, "app", cid, "a")
    b = node_mem.nodes.open(S, "app", cid, "b")
    chain(a, 2)
    chain(b, 2)
    a.add_turn("m1", "m0", "q1", assistant_content="only in a")
    a.flush()
    assert contents(b.history(max_tokens=None)) == ["q0", "a0", "q1", "a1"]
    assert len(b.message_log("m1")) == 1
    # Another user cannot replace (nor read) the turn.
    bob = node_mem.nodes.open(OTHER, "app", cid, "a")
    bob.add_turn("m1", "m0", "q1", assistant_content="bob's")
    with pytest.raises(NotFound):
        bob.flush()
    with pytest.raises(NotFound):
        bob.message_log("m1")
    assert contents(a.history(max_tokens=None))[3] == "only in a"
    # A clear starts a new generation: the id is new there, its log starts afresh.
    a.clear()
    a.add_turn("m1", None, "q1", assistant_content="after clear")
    a.flush()
    assert [t.revision for t in a.message_log("m1")] == [None]
    assert contents(a.history(max_tokens=None)) == ["q1", "after clear"]


def test_concurrent_replacements_leave_one_visible_turn_and_every_text_in_the_log(node_mem):
    cid = conv(node_mem)
    n = node_mem.nodes.open(S, "app", cid, "llm")
    chain(n, 3)
    writers = 4
    errors: list[BaseException] = []

    def replace(k: int) -> None:
        try:
            node = node_mem.nodes.open(S, "app", cid, "llm")
            node.add_turn("m1", "m0", "q1", assistant_content=f"writer {k}")
            node.flush()
        except BaseException as exc:
            errors.append(exc)

    threads = [threading.Thread(target=replace, args=(k,)) for k in range(writers)]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    assert errors == []
    h = n.history("m2", max_tokens=None)
    shown = [t.turn for t in h.turns if t.turn.message_id == "m1"]
    assert len(shown) == 1
    assert shown[0].assistant_content in {f"writer {k}" for k in range(writers)}
    assert contents(h)[:2] + contents(h)[4:] == ["q0", "a0", "q2", "a2"]
    said = sorted(t.assistant_content for t in n.message_log("m1"))
    assert said == ["a1", *(f"writer {k}" for k in range(writers))]
