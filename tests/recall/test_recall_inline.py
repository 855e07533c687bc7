"""``MEMSTRATA_RECALL_EMBED=inline``: an append of a small message embeds it before it
returns, so recall finds it by meaning with no catch-up and no job; a burst of appends
and long messages go to the batched embedding job instead."""

from __future__ import annotations

import logging
from collections.abc import Sequence
from typing import Literal

import pytest

from memstrata import Memory, Scope
from memstrata.embeddings import Embedder
from memstrata.errors import BackendUnavailable
from memstrata.testing import FakeEmbedder
from memstrata.testing.conformance import fresh_scope


def _inline(mem: Memory, emb: Embedder | FakeEmbedder) -> Memory:
    mem.core.recall.use(emb)
    mem.core.recall.mode = "inline"
    mem.core.context.auto_compact = False
    # Reads embed nothing themselves: whatever is searchable by meaning, the append made so.
    mem.core.settings.recall_read_embed_max = 0
    return mem


def _embed_jobs(mem: Memory) -> int:
    return sum(j.kind == "recall.embed" for j in mem.jobs.list().items)


def test_an_append_is_found_by_meaning_with_no_catch_up_and_no_job(
    memory: Memory, minilm: Embedder
) -> None:
    mem = _inline(memory, minilm)
    scope = fresh_scope()
    conv = mem.conversations.create(scope)
    stored = mem.messages.append(
        scope, conv.id, role="user", content="My dog Juniper is a border collie."
    )
    assert mem.recall.pending(scope) == 0  # embedded before the append returned
    assert _embed_jobs(mem) == 0
    # No word in common with the statement: only its vector can find it.
    hits = mem.recall.search(scope, "Which breed is the pet?", k=3, explain=True)
    assert hits.pending == 0
    assert hits[0].message.id == stored.id
    assert hits[0].signals is not None
    assert hits[0].signals["keyword_rank"] is None
    assert hits[0].signals["vector_rank"] == 1
    # And the context of a new conversation brings it back.
    other = mem.conversations.create(scope)
    mem.messages.append(scope, other.id, role="user", content="What breed is my dog Juniper?")
    ctx = mem.context(scope, other.id)
    assert ctx.report.tiers["recall"].pending == 0
    assert [i.id for i in ctx.injected.get("recall", [])] == [stored.id]


def test_a_completed_reply_is_embedded_at_completion(memory: Memory) -> None:
    emb = FakeEmbedder(64)
    mem = _inline(memory, emb)
    scope = fresh_scope()
    conv = mem.conversations.create(scope)
    mem.core.settings.recall_embed_inline_burst_ms = 0
    draft = mem.messages.append(scope, conv.id, role="assistant", content="", status="pending")
    assert emb.calls == []  # nothing to embed yet
    mem.messages.complete(scope, conv.id, draft.id, content="Tomatoes like full sun.")
    assert emb.calls == [["Tomatoes like full sun."]]
    assert mem.recall.pending(scope) == 0


def test_a_burst_of_appends_is_left_to_the_batched_job(memory: Memory) -> None:
    emb = FakeEmbedder(64)
    mem = _inline(memory, emb)
    mem.core.settings.recall_embed_inline_burst_ms = 600_000  # every append below is a burst
    scope = fresh_scope()
    conv = mem.conversations.create(scope)
    for i in range(4):
        mem.messages.append(scope, conv.id, role="user", content=f"note {i} on roses")
    # The first one came alone and was embedded; the rest wait for the job, queued once.
    assert [t for call in emb.calls for t in call] == ["note 0 on roses"]
    assert mem.recall.pending(scope) == 3
    assert _embed_jobs(mem) == 1
    mem.recall.flush(scope)  # what the job runs: one batch
    assert emb.calls[-1] == ["note 1 on roses", "note 2 on roses", "note 3 on roses"]
    assert mem.recall.pending(scope) == 0
    # Appends spaced out are each embedded (here: no gap counts as a burst).
    mem.core.settings.recall_embed_inline_burst_ms = 0
    mem.messages.append(scope, conv.id, role="user", content="note 4 on roses")
    mem.messages.append(scope, conv.id, role="assistant", content="noted, roses")
    assert mem.recall.pending(scope) == 0


def test_a_long_message_is_left_to_the_job(memory: Memory) -> None:
    emb = FakeEmbedder(64)
    mem = _inline(memory, emb)
    mem.core.settings.recall_embed_inline_max_chars = 40
    scope = fresh_scope()
    conv = mem.conversations.create(scope)
    mem.messages.append(scope, conv.id, role="user", content="roses " * 10)
    assert emb.calls == []
    assert mem.recall.pending(scope) == 1
    assert _embed_jobs(mem) == 1


@pytest.mark.parametrize("mode", ["search", "background", "off"])
def test_other_modes_never_embed_at_append(
    memory: Memory, mode: Literal["search", "background", "off"]
) -> None:
    emb = FakeEmbedder(64)
    mem = _inline(memory, emb)
    mem.core.recall.mode = mode
    scope = fresh_scope()
    conv = mem.conversations.create(scope)
    mem.messages.append(scope, conv.id, role="user", content="roses need water")
    assert emb.calls == []


class _Broken(FakeEmbedder):
    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        raise BackendUnavailable("the embedder is down")


def test_an_embedder_failure_leaves_the_append_standing(
    memory: Memory, caplog: pytest.LogCaptureFixture
) -> None:
    mem = _inline(memory, _Broken(64))
    scope: Scope = fresh_scope()
    conv = mem.conversations.create(scope)
    with caplog.at_level(logging.WARNING, logger="memstrata.recall"):
        stored = mem.messages.append(scope, conv.id, role="user", content="roses need water")
    assert mem.messages.get(scope, conv.id, stored.id).content == "roses need water"
    assert mem.recall.pending(scope) == 1
    assert "left for the embedding job" in caplog.text


def test_the_burst_gap_is_a_setting(monkeypatch: pytest.MonkeyPatch) -> None:
    from pydantic import ValidationError

    from memstrata.config import Settings

    assert Settings().recall_embed_inline_burst_ms == 250.0
    monkeypatch.setenv("MEMSTRATA_RECALL_EMBED_INLINE_BURST_MS", "0")
    assert Settings().recall_embed_inline_burst_ms == 0.0
    monkeypatch.setenv("MEMSTRATA_RECALL_EMBED_INLINE_BURST_MS", "-1")
    with pytest.raises(ValidationError, match="recall_embed_inline_burst_ms"):
        Settings()
