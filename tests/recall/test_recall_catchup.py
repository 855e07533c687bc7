"""Read-path embedding: a context reuses its query message's stored vector, and a read
embeds the caller's waiting messages, newest first, up to a bound by count (the job
does the rest, and the read reports it as pending)."""

from __future__ import annotations

import pytest

from memstrata import Memory, Scope
from memstrata.testing import FakeEmbedder
from memstrata.testing.conformance import fresh_scope


@pytest.fixture
def fake(memory: Memory) -> tuple[Memory, FakeEmbedder]:
    emb = FakeEmbedder(64)
    memory.core.recall.use(emb)
    memory.core.context.auto_compact = False
    return memory, emb


def _turns(mem: Memory, scope: Scope, n: int) -> str:
    conv = mem.conversations.create(scope)
    for i in range(n):
        mem.messages.append(scope, conv.id, role="user", content=f"question {i} about gardening")
        mem.messages.append(scope, conv.id, role="assistant", content=f"answer {i} on tomatoes")
    return conv.id


def _embedded(emb: FakeEmbedder) -> list[str]:
    return [t for call in emb.calls for t in call]


def test_context_reuses_the_stored_vector_of_its_query(fake: tuple[Memory, FakeEmbedder]) -> None:
    mem, emb = fake
    scope = fresh_scope()
    cid = _turns(mem, scope, 3)
    mem.messages.append(scope, cid, role="user", content="what about my roses")
    mem.recall.flush(scope)
    emb.calls.clear()
    ctx = mem.context(scope, cid)
    assert _embedded(emb) == []  # the newest user message already has its vector
    assert ctx.report.tiers["recall"] is not None
    # An explicit query is not a stored message: it is embedded.
    mem.context(scope, cid, query="tomatoes")
    assert _embedded(emb) == ["tomatoes"]


def test_a_waiting_query_message_is_embedded_once(fake: tuple[Memory, FakeEmbedder]) -> None:
    mem, emb = fake
    scope = fresh_scope()
    cid = _turns(mem, scope, 2)
    mem.recall.flush(scope)
    mem.messages.append(scope, cid, role="user", content="what about my roses")
    emb.calls.clear()
    mem.context(scope, cid)
    mem.context(scope, cid)
    assert _embedded(emb) == ["what about my roses"]  # stored at the first read, reused
    assert mem.recall.pending(scope) == 0


def test_a_read_embeds_the_newest_waiting_messages_up_to_its_bound(
    fake: tuple[Memory, FakeEmbedder],
) -> None:
    mem, emb = fake
    scope = fresh_scope()
    _turns(mem, scope, 5)
    assert mem.recall.pending(scope) == 10
    mem.core.settings.recall_read_embed_max = 4
    emb.calls.clear()
    hits = mem.recall.search(scope, "gardening", k=3)
    assert hits  # keywords find messages still waiting
    # The four newest were embedded; the read says how many are left.
    assert _embedded(emb)[:4] == [
        "answer 4 on tomatoes",
        "question 4 about gardening",
        "answer 3 on tomatoes",
        "question 3 about gardening",
    ]
    assert hits.pending == 6
    assert mem.recall.pending(scope) == 6
    # What the read left is handed to the debounced embedding job.
    assert "recall.embed" in [j.kind for j in mem.jobs.list().items]
    # The next read takes the next four, then the rest: nothing is left.
    assert mem.recall.search(scope, "gardening", k=3).pending == 2
    assert mem.recall.search(scope, "gardening", k=3).pending == 0
    assert mem.recall.pending(scope) == 0


def test_a_bound_of_zero_embeds_nothing_and_says_so(fake: tuple[Memory, FakeEmbedder]) -> None:
    mem, emb = fake
    scope = fresh_scope()
    cid = _turns(mem, scope, 2)
    mem.core.settings.recall_read_embed_max = 0
    mem.messages.append(scope, cid, role="user", content="anything about roses?")
    emb.calls.clear()
    ctx = mem.context(scope, cid, query="roses")
    assert _embedded(emb) == ["roses"]  # the query only
    assert ctx.report.tiers["recall"].pending == 5
    assert ctx.report.to_dict()["tiers"]["recall"]["pending"] == 5


def test_flush_embeds_in_wide_windows(fake: tuple[Memory, FakeEmbedder]) -> None:
    from memstrata.recall.service import FLUSH_BATCH

    mem, emb = fake
    scope = fresh_scope()
    _turns(mem, scope, 150)  # 300 messages: more than one window
    emb.calls.clear()
    steps: list[int] = []
    assert mem.recall.flush(scope, progress=steps.append) == 300
    assert steps == [FLUSH_BATCH, 300 - FLUSH_BATCH]
    assert [len(c) for c in emb.calls] == steps  # one embedder call per window
    assert mem.recall.pending(scope) == 0
