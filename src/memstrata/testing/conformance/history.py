"""Conformance: the history of a branch under a token budget."""

from __future__ import annotations

import uuid

import pytest

from memstrata import Memory
from memstrata.errors import InvalidInput, NotFound
from memstrata.testing.conformance.helpers import (
    _call,
    _cost,
    _ids,
    fresh_scope,
)
from memstrata.tokens import get_tokenizer


class _Turns:
    """A conversation with a system message, a greeting and three turns, one with tools."""

    def __init__(self, memory: Memory) -> None:
        self.scope = fresh_scope()
        add = memory.messages.append
        self.cid = memory.conversations.create(self.scope).id
        s, c = self.scope, self.cid
        self.system = [add(s, c, role="system", content="You are a careful travel agent.")]
        self.greeting = [add(s, c, role="assistant", content="Hello! Where to?")]
        self.t1 = [
            add(s, c, role="user", content="I want to see Lisbon in May."),
            add(s, c, role="assistant", content="Lisbon in May is lovely; about 22 degrees."),
        ]
        self.t2 = [
            add(s, c, role="user", content="Find me a flight from Berlin."),
            add(s, c, role="assistant", content="", tool_calls=[_call("f1", "flights")]),
            add(s, c, role="tool", content='[{"flight": "TP 551", "eur": 189}]', tool_call_id="f1"),
            add(s, c, role="assistant", content="TP 551 costs 189 euros."),
        ]
        self.t3 = [
            add(s, c, role="user", content="Book it."),
            add(s, c, role="assistant", content="Booked: TP 551, seat 14C."),
        ]


class HistoryConformance:
    def test_empty_conversation(self, memory: Memory) -> None:
        scope = fresh_scope()
        conv = memory.conversations.create(scope)
        h = memory.history(scope, conv.id)
        assert (h.leaf_id, h.messages, h.tokens, h.truncated, h.over_budget) == (
            None,
            [],
            0,
            False,
            False,
        )

    def test_everything_fits(self, memory: Memory) -> None:
        t = _Turns(memory)
        every = t.system + t.greeting + t.t1 + t.t2 + t.t3
        h = memory.history(t.scope, t.cid, max_tokens=None)
        assert _ids(h.messages) == _ids(every)
        assert h.tokens == _cost(memory, *every)
        assert (h.truncated, h.over_budget) == (False, False)
        assert h.leaf_id == t.t3[-1].id
        assert memory.history(t.scope, t.cid, max_tokens=h.tokens).messages == h.messages

    def test_whole_turns_dropped_oldest_first(self, memory: Memory) -> None:
        t = _Turns(memory)
        fixed = _cost(memory, *t.system)
        budget = fixed + _cost(memory, *t.t3, *t.t2) - 1  # turn 2 misses by one token
        h = memory.history(t.scope, t.cid, max_tokens=budget)
        assert _ids(h.messages) == _ids(t.system + t.t3)
        assert (h.truncated, h.over_budget) == (True, False)
        assert h.tokens == fixed + _cost(memory, *t.t3)
        h = memory.history(t.scope, t.cid, max_tokens=budget + 1)
        assert _ids(h.messages) == _ids(t.system + t.t2 + t.t3)
        # The greeting before the first user message is a turn of its own.
        h = memory.history(t.scope, t.cid, max_tokens=_cost(memory, *t.system, *t.t1, *t.t2, *t.t3))
        assert _ids(h.messages) == _ids(t.system + t.t1 + t.t2 + t.t3)
        assert h.truncated is True

    def test_newest_turn_kept_over_budget(self, memory: Memory) -> None:
        t = _Turns(memory)
        for budget in (0, 1, _cost(memory, *t.system)):
            h = memory.history(t.scope, t.cid, max_tokens=budget)
            assert _ids(h.messages) == _ids(t.system + t.t3)
            assert (h.truncated, h.over_budget) == (True, True)
            assert h.tokens == _cost(memory, *t.system, *t.t3)

    def test_max_messages(self, memory: Memory) -> None:
        t = _Turns(memory)
        h = memory.history(t.scope, t.cid, max_tokens=None, max_messages=5)
        assert _ids(h.messages) == _ids(t.system + t.t3)  # turn 2 (4 messages) would make 6
        assert h.truncated is True
        h = memory.history(t.scope, t.cid, max_tokens=None, max_messages=6)
        assert _ids(h.messages) == _ids(t.system + t.t2 + t.t3)
        h = memory.history(t.scope, t.cid, max_tokens=None, max_messages=1)
        assert _ids(h.messages) == _ids(t.system + t.t3)  # the newest turn is always kept

    def test_leaf_selects_the_branch(self, memory: Memory) -> None:
        t = _Turns(memory)
        alt = memory.messages.append(
            t.scope,
            t.cid,
            role="assistant",
            content="Booked seat 2A instead.",
            parent_id=t.t3[0].id,
        )
        h = memory.history(t.scope, t.cid, max_tokens=None)
        assert _ids(h.messages)[-2:] == [t.t3[0].id, alt.id]
        h = memory.history(t.scope, t.cid, leaf_id=t.t3[1].id, max_tokens=None)
        assert _ids(h.messages)[-2:] == [t.t3[0].id, t.t3[1].id]
        h = memory.history(t.scope, t.cid, leaf_id=t.t1[0].id, max_tokens=None)
        assert _ids(h.messages) == _ids(t.system + t.greeting + t.t1[:1])

    def test_model_picks_the_encoding(self, memory: Memory) -> None:
        scope = fresh_scope()
        conv = memory.conversations.create(scope)
        texts = [
            "Привет! Как дела? Расскажи мне о погоде в Москве.",
            "В Москве сегодня солнечно и тепло, около двадцати градусов.",
            "Спасибо большое, это очень полезная информация.",
            "Пожалуйста, обращайтесь в любое время.",
        ]
        for i, text in enumerate(texts):
            memory.messages.append(
                scope, conv.id, role="user" if i % 2 == 0 else "assistant", content=text
            )
        default = memory.history(scope, conv.id, max_tokens=None)
        gpt4 = memory.history(scope, conv.id, max_tokens=None, model="gpt-4")
        cl100k = get_tokenizer("gpt-4")
        assert gpt4.encoding == "cl100k_base"
        assert gpt4.tokens == sum(cl100k.count_message(t) for t in texts)
        assert default.tokens == _cost(memory, *default.messages)
        assert gpt4.tokens != default.tokens
        small, big = sorted((gpt4.tokens, default.tokens))
        cut_model = "gpt-4" if gpt4.tokens == big else None
        h = memory.history(scope, conv.id, max_tokens=small, model=cut_model)
        assert h.truncated is True
        assert len(h.messages) == 2
        other = None if cut_model == "gpt-4" else "gpt-4"
        assert len(memory.history(scope, conv.id, max_tokens=small, model=other).messages) == 4

    def test_invalid_arguments(self, memory: Memory) -> None:
        t = _Turns(memory)
        with pytest.raises(InvalidInput):
            memory.history(t.scope, t.cid, max_tokens=-1)
        with pytest.raises(InvalidInput):
            memory.history(t.scope, t.cid, max_messages=0)
        with pytest.raises(NotFound):
            memory.history(t.scope, t.cid, leaf_id=str(uuid.uuid4()))
        with pytest.raises(NotFound):
            memory.history(fresh_scope(), t.cid)

    def test_to_openai(self, memory: Memory) -> None:
        scope = fresh_scope()
        conv = memory.conversations.create(scope)
        add = memory.messages.append
        image = {"type": "image", "transfer_method": "remote_url", "url": "https://x.test/p.png"}
        doc = {"type": "document", "transfer_method": "local_file", "upload_file_id": "up-1",
               "filename": "plan.pdf"}  # fmt: skip
        add(scope, conv.id, role="system", content="sys")
        add(scope, conv.id, role="user", content="What is this?", files=[image, doc])
        add(scope, conv.id, role="assistant", content="", tool_calls=[_call("c1", "inspect")])
        add(scope, conv.id, role="tool", content="a cat", tool_call_id="c1")
        add(scope, conv.id, role="assistant", content="A cat.")
        out = memory.history(scope, conv.id).to_openai()
        assert [m["role"] for m in out] == ["system", "user", "assistant", "tool", "assistant"]
        assert all("id" not in m for m in out)
        assert out[0]["content"] == "sys"
        parts = out[1]["content"]
        assert isinstance(parts, list)
        url = {"url": "https://x.test/p.png", "detail": "high"}  # Dify's default detail
        assert {"type": "image_url", "image_url": url} in parts
        texts = [p["text"] for p in parts if p["type"] == "text"]
        assert "What is this?" in texts
        assert any("plan.pdf" in t for t in texts)
        assert out[2]["tool_calls"] == [_call("c1", "inspect")]
        assert not out[2]["content"]
        assert out[3] == {"role": "tool", "content": "a cat", "tool_call_id": "c1"}
        assert out[4] == {"role": "assistant", "content": "A cat."}

    def test_to_text(self, memory: Memory) -> None:
        scope = fresh_scope()
        conv = memory.conversations.create(scope)
        add = memory.messages.append
        image = {"type": "image", "transfer_method": "remote_url", "url": "https://x.test/p.png"}
        add(scope, conv.id, role="system", content="sys")
        add(scope, conv.id, role="user", content="Look", files=[image])
        add(scope, conv.id, role="assistant", content="Nice picture.")
        h = memory.history(scope, conv.id)
        assert h.to_text() == "Human: [image] Look\nAssistant: Nice picture."
        assert h.to_text(human_prefix="U", ai_prefix="A") == "U: [image] Look\nA: Nice picture."

    def test_to_dict(self, memory: Memory) -> None:
        t = _Turns(memory)
        h = memory.history(t.scope, t.cid, max_tokens=None)
        d = h.to_dict()
        assert d["leaf_id"] == h.leaf_id
        assert [m["id"] for m in d["messages"]] == _ids(h.messages)
        assert (d["tokens"], d["truncated"], d["over_budget"]) == (h.tokens, False, False)
        assert set(d["messages"][0]) == {
            "id",
            "role",
            "content",
            "files",
            "tool_calls",
            "tool_call_id",
        }
