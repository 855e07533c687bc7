"""Keyword indexing batched across appends (SQLite FTS5, ``recall/keywords.py``): a read
still finds a message appended a moment ago, on every backend, from any process."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memstrata import Memory, Scope
from memstrata.config import Settings
from memstrata.recall import keywords as kw
from memstrata.recall.catchup import CatchUp
from memstrata.recall.tier import render_item
from memstrata.storage.plan import Exec, Query, read, write
from memstrata.testing.conformance import fresh_scope


@pytest.fixture
def mem(memory: Memory) -> Memory:
    memory.core.recall.use(None)  # keywords alone: the full-text index is what is tested
    memory.core.context.auto_compact = False
    return memory


def _scalar(mem: Memory, sql: str, *params: object) -> int:
    def op():  # type: ignore[no-untyped-def]
        rows = yield Query(sql, params)
        return rows[0][0]

    return int(mem.core.engine.run(read(op)))


def _ids(mem: Memory, scope: Scope, query: str) -> list[str]:
    return [h.message.id for h in mem.recall.search(scope, query, k=5)]


def test_search_finds_a_message_appended_a_moment_ago(mem: Memory) -> None:
    scope = fresh_scope()
    conv = mem.conversations.create(scope)
    mem.messages.append(scope, conv.id, role="user", content="I walked the dog today")
    new = mem.messages.append(scope, conv.id, role="user", content="My aunt grows quinces")
    assert _ids(mem, scope, "quinces") == [new.id]
    # Found again (nothing written twice), and the next message too.
    assert _ids(mem, scope, "quinces") == [new.id]
    later = mem.messages.append(scope, conv.id, role="assistant", content="Quinces make jelly")
    assert set(_ids(mem, scope, "quinces")) == {new.id, later.id}


def test_context_recalls_a_message_of_another_conversation_appended_just_before(
    mem: Memory,
) -> None:
    scope = fresh_scope()
    old = mem.conversations.create(scope)
    fact = mem.messages.append(
        scope, old.id, role="user", content="My cousin Bertolt keeps bees near Tallinn"
    )
    conv = mem.conversations.create(scope)
    mem.messages.append(scope, conv.id, role="user", content="Where does Bertolt keep his bees?")
    ctx = mem.context(scope, conv.id, budget=4000)
    assert any(render_item(fact) in (m["content"] or "") for m in ctx.messages)


def test_appends_write_the_full_text_rows_in_batches(mem: Memory) -> None:
    scope = fresh_scope()
    conv = mem.conversations.create(scope)
    ids = [
        mem.messages.append(scope, conv.id, role="user", content=f"note {i} on walnuts").id
        for i in range(kw.FLUSH_EVERY + 10)
    ]
    if mem.core.engine.dialect != "sqlite":
        # PostgreSQL writes each tsvector in its append's transaction: all found at once.
        assert len(mem.recall.search(scope, "walnuts", k=200)) == len(ids)
        return
    fts = _scalar(mem, "SELECT count(*) FROM recall_terms")
    # The append FLUSH_EVERY seqs past the (empty) index wrote the batch; what waits
    # stays under one batch.
    assert 0 < fts < len(ids)
    assert len(ids) - fts <= kw.FLUSH_EVERY
    assert mem.core.engine.run(read(kw.waiting))
    assert len(mem.recall.search(scope, "walnuts", k=200)) == len(ids)
    assert not mem.core.engine.run(read(kw.waiting))
    assert _scalar(mem, "SELECT count(*) FROM recall_terms") == len(ids)
    assert CatchUp(mem.core).keywords() == 0  # nothing left to write


def test_a_message_completed_below_the_watermark_is_indexed_at_once(mem: Memory) -> None:
    scope = fresh_scope()
    conv = mem.conversations.create(scope)
    mem.messages.append(scope, conv.id, role="user", content="tell me about trees")
    pending = mem.messages.append(scope, conv.id, role="assistant", status="pending")
    other = mem.conversations.create(scope)
    for i in range(5):
        mem.messages.append(scope, other.id, role="user", content=f"filler {i} about rivers")
    assert len(mem.recall.search(scope, "rivers", k=10)) == 5  # flushed past the pending one
    mem.messages.complete(scope, conv.id, pending.id, content="A sequoia outlives empires")
    assert _ids(mem, scope, "sequoia") == [pending.id]
    if mem.core.engine.dialect == "sqlite":
        assert not mem.core.engine.run(read(kw.waiting))


def test_deleting_waiting_messages_leaves_no_index_rows(mem: Memory) -> None:
    scope = fresh_scope()
    keep = mem.conversations.create(scope)
    kept = mem.messages.append(scope, keep.id, role="user", content="I like lighthouses")
    gone = mem.conversations.create(scope)
    mem.messages.append(scope, gone.id, role="user", content="lighthouses and ferries")
    mem.conversations.delete(scope, gone.id)
    assert _ids(mem, scope, "lighthouses") == [kept.id]
    assert _ids(mem, scope, "ferries") == []
    if mem.core.engine.dialect == "sqlite":
        docs = _scalar(mem, "SELECT count(*) FROM recall_docs")
        assert _scalar(mem, "SELECT count(*) FROM recall_terms") == docs


@pytest.fixture
def two_processes(tmp_path: Path) -> Iterator[tuple[Memory, Memory]]:
    """Two memories on one SQLite file, as two processes would open it."""
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    a = Memory.open(url, settings=Settings(home=tmp_path, worker="off", recall_embed="off"))
    b = Memory.open(url, settings=Settings(home=tmp_path, worker="off", recall_embed="off"))
    try:
        yield a, b
    finally:
        a.close()
        b.close()


def test_another_process_finds_what_one_appended(two_processes: tuple[Memory, Memory]) -> None:
    a, b = two_processes
    scope = fresh_scope()
    conv = a.conversations.create(scope)
    new = a.messages.append(scope, conv.id, role="user", content="The kiln reached 1200 degrees")
    assert [h.message.id for h in b.recall.search(scope, "kiln", k=3)] == [new.id]


@pytest.fixture
def on_off(tmp_path: Path) -> Iterator[tuple[Memory, Memory]]:
    """Two memories on one SQLite file, one indexing for recall, one not."""
    url = f"sqlite:///{tmp_path / 'shared.db'}"
    on = Memory.open(url, settings=Settings(home=tmp_path, worker="off", recall_embed="off"))
    off = Memory.open(
        url,
        settings=Settings(home=tmp_path, worker="off", recall_embed="off", recall_index=False),
    )
    try:
        yield on, off
    finally:
        on.close()
        off.close()


def test_backfill_flushes_what_waits_below_the_messages_it_indexes(
    on_off: tuple[Memory, Memory],
) -> None:
    on, off = on_off
    scope = fresh_scope()
    conv = on.conversations.create(scope)
    first = on.messages.append(scope, conv.id, role="user", content="first about otters")
    assert [h.message.id for h in on.recall.search(scope, "otters", k=3)] == [first.id]
    # Stored without recall (no flush looked at it yet: it lies above the mark).
    stored = off.messages.append(scope, conv.id, role="user", content="second about herons")
    waiting = on.messages.append(scope, conv.id, role="user", content="third about badgers")
    assert on.core.engine.run(read(kw.waiting))

    # Older, and indexed by nobody: below the mark, as a store made before recall.
    def drop(seq: int):  # type: ignore[no-untyped-def]
        yield Exec("DELETE FROM recall_terms WHERE rowid = ?", (seq,))
        yield Exec("DELETE FROM recall_docs WHERE seq = ?", (seq,))

    on.core.engine.run(write(lambda: drop(first.seq)))
    # The backfill writes what waits (the flush looks at the messages above the
    # mark), then indexes the one below it.
    assert on.recall.backfill() == 1
    for query, message in (("otters", first), ("herons", stored), ("badgers", waiting)):
        assert [h.message.id for h in on.recall.search(scope, query, k=3)] == [message.id]
    assert not on.core.engine.run(read(kw.waiting))
    docs = _scalar(on, "SELECT count(*) FROM recall_docs")
    assert _scalar(on, "SELECT count(*) FROM recall_terms") == docs == 3


def test_messages_stored_without_the_index_wait_for_a_backfill(
    on_off: tuple[Memory, Memory],
) -> None:
    """A flush looks back LOOKBACK messages at most: what a process stored with the index
    off stays out of recall (as before the flush mark) until ``memstrata reindex``, and no
    append pays for indexing it."""
    on, off = on_off
    scope = fresh_scope()
    conv = on.conversations.create(scope)
    for i in range(kw.LOOKBACK + 50):
        off.messages.append(scope, conv.id, role="user", content=f"old note {i} on figs")
    on.messages.append(scope, conv.id, role="user", content="a fresh note on figs")
    assert on.recall.search(scope, "fresh figs", k=1)  # read-your-writes holds
    assert _scalar(on, "SELECT count(*) FROM recall_docs") == kw.LOOKBACK
    assert on.recall.backfill() == 51
    assert _scalar(on, "SELECT count(*) FROM recall_docs") == kw.LOOKBACK + 51
    assert _scalar(on, "SELECT count(*) FROM recall_terms") == kw.LOOKBACK + 51
