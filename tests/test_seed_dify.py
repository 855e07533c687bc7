"""Dify's conversation and node memory semantics, made exact (one test per behaviour)."""

from __future__ import annotations

from pathlib import Path

import pytest

from memstrata import Memory, Scope
from memstrata.errors import InvalidInput, NotFound

S = Scope("t1", "alice")


@pytest.fixture
def mem(tmp_path: Path):
    m = Memory.open(f"sqlite:///{(tmp_path / 'm.db').as_posix()}")
    yield m
    m.close()


def _chat(mem: Memory, pairs: list[tuple[str, str]]) -> str:
    cid = mem.conversations.create(S).id
    for q, a in pairs:
        mem.messages.append(S, cid, role="user", content=q)
        mem.messages.append(S, cid, role="assistant", content=a)
    return cid


def test_history_before_a_query_leaves_the_query_out(mem):
    cid = _chat(mem, [("one?", "1"), ("two?", "2")])
    query = mem.messages.append(S, cid, role="user", content="three?")
    # Dify's prompt is [*history, query]: the history must end before the query's turn.
    h = mem.history(S, cid, before=query.id)
    assert [m.content for m in h.messages] == ["one?", "1", "two?", "2"]
    prompt = [*h.to_openai(), {"role": "user", "content": query.content}]
    assert [m["content"] for m in prompt].count("three?") == 1
    # The plain history of the active leaf does hold it (the query is stored already).
    assert mem.history(S, cid).messages[-1].id == query.id


def test_history_before_a_reply_ends_before_the_turn_it_answers(mem):
    cid = _chat(mem, [("one?", "1")])
    q = mem.messages.append(S, cid, role="user", content="two?")
    tool = mem.messages.append(
        S,
        cid,
        role="assistant",
        content="",
        tool_calls=[{"id": "c1", "function": {"name": "f", "arguments": "{}"}}],
    )
    reply = mem.messages.append(S, cid, role="tool", content="42", tool_call_id="c1")
    for mid in (q.id, tool.id, reply.id):
        h = mem.history(S, cid, before=mid)
        assert [m.content for m in h.messages] == ["one?", "1"]


def test_history_before_follows_the_branch_of_the_message(mem):
    cid = _chat(mem, [("root?", "r")])
    path = mem.messages.path(S, cid)
    first = mem.messages.append(S, cid, role="user", content="a?")
    mem.messages.append(S, cid, role="assistant", content="A")
    # An edit of "a?" on another branch; its history is the shared start only.
    edit = mem.messages.append(S, cid, role="user", content="a, edited?", parent_id=path[-1].id)
    # A follow-up under the unanswered "a?" of the first branch.
    later = mem.messages.append(S, cid, role="user", content="b?", parent_id=first.id)
    assert [m.content for m in mem.history(S, cid, before=edit.id).messages] == ["root?", "r"]
    got = [m.content for m in mem.history(S, cid, before=later.id).messages]
    assert got == ["root?", "r", "a?"]


def test_history_before_the_first_turn_keeps_only_the_system_run(mem):
    cid = mem.conversations.create(S).id
    mem.messages.append(S, cid, role="system", content="Be brief.")
    q = mem.messages.append(S, cid, role="user", content="hi")
    assert [m.content for m in mem.history(S, cid, before=q.id).messages] == ["Be brief."]
    bare = mem.conversations.create(S).id
    q2 = mem.messages.append(S, bare, role="user", content="hi")
    h = mem.history(S, bare, before=q2.id)
    assert (h.messages, h.leaf_id) == ([], None)


def test_history_before_checks_its_message(mem):
    cid = _chat(mem, [("one?", "1")])
    other = _chat(mem, [("elsewhere", "x")])
    stranger = mem.messages.path(S, other)[-1].id
    with pytest.raises(NotFound):
        mem.history(S, cid, before=stranger)


def test_history_before_with_a_leaf_whose_branch_holds_it(mem):
    cid = _chat(mem, [("one?", "1"), ("two?", "2")])
    path = mem.messages.path(S, cid)
    leaf = path[-1].id
    # The two agree: the same answer as ``before`` alone, whatever branch is active.
    assert mem.history(S, cid, leaf_id=leaf, before=leaf).messages == (
        mem.history(S, cid, before=leaf).messages
    )
    got = mem.history(S, cid, leaf_id=leaf, before=path[2].id).messages
    assert [m.content for m in got] == ["one?", "1"]
    # A message of another branch is refused, naming both.
    side = mem.messages.append(S, cid, role="user", content="side?", parent_id=path[1].id)
    with pytest.raises(InvalidInput, match="not on the branch"):
        mem.history(S, cid, leaf_id=leaf, before=side.id)
    with pytest.raises(InvalidInput):
        mem.history(S, cid, leaf_id=side.id, before=path[2].id)


def test_max_messages_none_means_no_cap(mem):
    cid = _chat(mem, [(f"q{i}", f"a{i}") for i in range(300)])
    h = mem.history(S, cid, max_tokens=None, max_messages=None)
    assert len(h.messages) == 600
    assert not h.truncated
    capped = mem.history(S, cid, max_tokens=None)
    assert len(capped.messages) == 500
    assert capped.truncated
    with pytest.raises(InvalidInput):
        mem.history(S, cid, max_messages=0)
    with pytest.raises(InvalidInput):
        mem.history(S, cid, max_messages="10")  # type: ignore[arg-type]


def _node(mem: Memory):
    cid = mem.conversations.create(S).id
    return cid, mem.nodes.open(S, "app", cid, "llm")


def test_node_history_before_the_current_turn_is_stored_ends_at_the_newest_turn(mem):
    cid, node = _node(mem)
    node.add_turn("m1", None, "q1", assistant_content="a1")
    node.add_turn("m2", "m1", "q2", assistant_content="a2")
    node.flush()
    # Dify's order: the LLM node reads its memory for m3, then stores m3's turn.
    h = mem.nodes.history(S, "app", cid, "llm", current_message_id="m3")
    assert [m.content for m in h.messages] == ["q1", "a1", "q2", "a2"]
    mem.nodes.add_turn(
        S,
        "app",
        cid,
        "llm",
        message_id="m3",
        parent_message_id="m2",
        user_content="q3",
        assistant_content="a3",
    )
    after = mem.nodes.history(S, "app", cid, "llm", current_message_id="m2")
    assert [m.content for m in after.messages] == ["q1", "a1", "q2", "a2"]  # stored: its thread
    # An explicit parent still decides, and None still starts a new thread.
    assert (
        mem.nodes.history(
            S, "app", cid, "llm", current_message_id="m9", parent_message_id=None
        ).messages
        == []
    )


def test_node_add_turn_is_idempotent_on_message_id(mem):
    from memstrata.errors import Conflict

    cid, node = _node(mem)
    node.add_turn("m1", None, "q1", assistant_content="a1")
    node.add_turn("m1", None, "q1", assistant_content="a1")  # a retried call: buffered once
    assert len(node.pending) == 1
    assert node.flush() == 1
    # A replayed run with the same turn writes nothing.
    again = mem.nodes.open(S, "app", cid, "llm")
    again.add_turn("m1", None, "q1", assistant_content="a1")
    assert again.flush() == 0
    assert again.pending == []
    mem.nodes.add_turn(
        S, "app", cid, "llm", message_id="m1", user_content="q1", assistant_content="a1"
    )
    h = mem.nodes.history(S, "app", cid, "llm")
    assert [m.content for m in h.messages] == ["q1", "a1"]
    # Other content under a stored id is a conflict; nothing is written, the buffer stays.
    clash = mem.nodes.open(S, "app", cid, "llm")
    clash.add_turn("m1", None, "q1", assistant_content="another answer")
    with pytest.raises(Conflict):
        clash.flush()
    assert len(clash.pending) == 1
    assert [m.content for m in mem.nodes.history(S, "app", cid, "llm").messages] == ["q1", "a1"]


def test_node_loop_iterations_of_one_message_flush_together_and_replay_as_one(mem):
    cid, node = _node(mem)
    node.add_turn("m1", None, "try 1", assistant_content="no")
    node.add_turn("m1", None, "try 2", assistant_content="yes")
    assert node.flush() == 2
    replay = mem.nodes.open(S, "app", cid, "llm")
    replay.add_turn("m1", None, "try 1", assistant_content="no")
    replay.add_turn("m1", None, "try 2", assistant_content="yes")
    assert replay.flush() == 0
    assert len(mem.nodes.history(S, "app", cid, "llm", current_message_id="m1").turns) == 2


def test_node_clear_forgets_the_ids_too(mem):
    _cid, node = _node(mem)
    node.add_turn("m1", None, "q1", assistant_content="a1")
    node.flush()
    node.clear()
    node.add_turn("m1", None, "q1", assistant_content="something else")
    assert node.flush() == 1  # a cleared memory holds no id


def _image(**extra: object) -> dict[str, object]:
    return {
        "type": "image",
        "transfer_method": "remote_url",
        "url": "https://x.test/a.png",
        **extra,
    }


def test_image_detail_defaults_to_high_and_is_carried_into_to_openai(mem):
    cid = mem.conversations.create(S).id
    mem.messages.append(
        S, cid, role="user", content="Compare", files=[_image(), _image(detail="low")]
    )
    parts = mem.history(S, cid).to_openai()[0]["content"]
    assert [p["image_url"]["detail"] for p in parts if p["type"] == "image_url"] == ["high", "low"]
    with pytest.raises(InvalidInput):
        mem.messages.append(S, cid, role="user", content="x", files=[_image(detail="huge")])


def test_attachments_count_toward_budgets_by_the_tile_rule(mem):
    from memstrata.tokens import get_tokenizer, image_tokens

    assert image_tokens("low", 4000, 3000) == 85
    assert image_tokens("high", 1024, 1024) == 85 + 170 * 4  # 768 x 768: 2 x 2 tiles
    assert image_tokens("high", 2048, 4096) == 85 + 170 * 6  # 1024x2048 -> 768x1536: 2 x 3
    assert image_tokens("high", 100, 100) == 85 + 170  # small images are not scaled up
    assert image_tokens("auto") == image_tokens("high") == 765  # size unknown: 1024 x 1024
    cid = mem.conversations.create(S).id
    m = mem.messages.append(
        S,
        cid,
        role="user",
        content="Analyze this image",
        files=[_image(), _image(detail="low"), _image(width=512, height=512)],
    )
    text_only = get_tokenizer().count_message("Analyze this image")
    assert m.token_count == text_only + 765 + 85 + 255
    h = mem.history(S, cid)
    assert h.tokens == m.token_count
    # A document counts as the placeholder the model is sent.
    doc = {
        "type": "document",
        "transfer_method": "local_file",
        "upload_file_id": "u1",
        "filename": "report.pdf",
    }
    d = mem.messages.append(S, cid, role="user", content="", files=[doc])
    assert d.token_count == get_tokenizer().count_message("[document: report.pdf]")
    # The budget sees the images: a 500-token history cannot hold the image turn and more.
    mem.messages.append(S, cid, role="assistant", content="ok")
    assert mem.history(S, cid, max_tokens=500).messages[0].id == d.id


def test_node_turn_files_count_like_conversation_files(mem):
    cid = mem.conversations.create(S).id
    node = mem.nodes.open(S, "app", cid, "llm")
    node.add_turn("m1", None, "Analyze this image", user_files=[_image(detail="low")])
    node.flush()
    conv = mem.conversations.create(S).id
    mem.messages.append(
        S, conv, role="user", content="Analyze this image", files=[_image(detail="low")]
    )
    assert mem.nodes.history(S, "app", cid, "llm").tokens == mem.history(S, conv).tokens
