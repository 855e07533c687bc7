"""Migration 26 (``messages.parent_seq``, the parent's seq): a store made before it gets
every child's parent seq from its ``parent_id``, and history walks the branches it walked
before; appends, splices and imports keep the column exact afterwards, on SQLite and
PostgreSQL. And recall's leaner rows: migration 27 (``recall_docs`` keyed by its rowid) and
migration 31 (each row's token count beside it)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memstrata import Memory, Scope
from memstrata.config import Settings
from memstrata.storage.plan import Exec, Query, read, write
from memstrata.storage.schema import MIGRATIONS
from support import postgres_schema, postgres_url_for

ALICE = Scope("acme", "alice")


@pytest.fixture(params=["sqlite", "postgres"])
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{(tmp_path / 's.db').as_posix()}"
    else:
        with postgres_schema() as schema:
            yield postgres_url_for(schema)


def _rows(mem: Memory, sql: str) -> list[Any]:
    def op() -> Any:
        return (yield Query(sql, ()))

    return list(mem.core.engine.run(read(op)))


def _undo(mem: Memory, version: int, *statements: str) -> None:
    """Take the store back to what ``version - 1`` left: ``statements``, then the record."""

    def op() -> Any:
        for sql in statements:
            yield Exec(sql, ())
        yield Exec("DELETE FROM schema_migrations WHERE version = ?", (version,))

    mem.core.engine.run(write(op))


def _stale_parent_seqs(mem: Memory) -> list[Any]:
    """Children whose parent_seq is not their parent's seq (none when the column is exact)."""
    return _rows(
        mem,
        "SELECT c.id FROM messages c LEFT JOIN messages p ON p.conversation_id = "
        "c.conversation_id AND p.id = c.parent_id WHERE (c.parent_id IS NULL AND "
        "c.parent_seq IS NOT NULL) OR (c.parent_id IS NOT NULL AND (c.parent_seq IS NULL "
        "OR c.parent_seq <> p.seq))",
    )


def _tree(mem: Memory) -> tuple[str, list[str]]:
    """A branched conversation; its leaves."""
    cid = mem.conversations.create(ALICE).id
    q = mem.messages.append(ALICE, cid, role="system", content="Be brief.")
    q = mem.messages.append(ALICE, cid, role="user", content="Capital of Norway?")
    first = mem.messages.append(ALICE, cid, role="assistant", content="Oslo.")
    mem.messages.append(ALICE, cid, role="assistant", content="It is Oslo.", parent_id=q.id)
    mem.messages.append(ALICE, cid, role="user", content="And Sweden?")
    mem.messages.append(ALICE, cid, role="assistant", content="Stockholm.")
    mem.messages.append(ALICE, cid, role="user", content="Denmark?", parent_id=first.id)
    leaves = [m.id for m in mem.messages.leaves(ALICE, cid).items]
    return cid, leaves


def test_migration_26_fills_parent_seqs_and_history_is_unchanged(url: str, tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, worker="off")
    mem = Memory.open(url, settings=settings)
    try:
        assert mem.core.engine.schema_version() >= 26
        cid, leaves = _tree(mem)
        before = {leaf: mem.history(ALICE, cid, leaf_id=leaf) for leaf in leaves}
        paths = {leaf: mem.messages.path(ALICE, cid, leaf_id=leaf) for leaf in leaves}
        assert _stale_parent_seqs(mem) == []

        _undo(mem, 26, "ALTER TABLE messages DROP COLUMN parent_seq")
    finally:
        mem.close()
    mem = Memory.open(url, settings=settings)
    try:
        assert mem.core.engine.schema_version() == MIGRATIONS["sqlite"][-1].version
        assert _stale_parent_seqs(mem) == []
        for leaf, history in before.items():
            assert mem.history(ALICE, cid, leaf_id=leaf) == history
            assert mem.messages.path(ALICE, cid, leaf_id=leaf) == paths[leaf]
    finally:
        mem.close()


def test_splices_and_imports_keep_parent_seqs_exact(url: str, tmp_path: Path) -> None:
    mem = Memory.open(url, settings=Settings(home=tmp_path, worker="off"))
    try:
        cid, leaves = _tree(mem)
        path = mem.messages.path(ALICE, cid, leaf_id=leaves[-1])
        # Splice a message in the middle of a branch: its children take its parent.
        mem.messages.delete(ALICE, cid, path[2].id, mode="splice")
        assert _stale_parent_seqs(mem) == []
        spliced = [m.id for m in mem.messages.path(ALICE, cid, leaf_id=leaves[-1])]
        assert spliced == [m.id for m in path if m.id != path[2].id]
        lines: list[str] = []
        mem.transfer.export(lines.append, tenant="acme", user="alice")
        other = Memory.open(
            f"sqlite:///{(tmp_path / 'imported.db').as_posix()}",
            settings=Settings(home=tmp_path / "imported", worker="off"),
        )
        try:
            other.transfer.import_(lines)
            assert _stale_parent_seqs(other) == []
            got = [m.content for m in other.history(ALICE, cid, leaf_id=leaves[-1]).messages]
            assert got == [m.content for m in mem.history(ALICE, cid, leaf_id=leaves[-1]).messages]
        finally:
            other.close()
    finally:
        mem.close()


def test_recall_docs_is_keyed_by_its_rowid_on_sqlite(tmp_path: Path) -> None:
    """Migration 27: no b-tree of its own for recall_docs' seq (it is the rowid)."""
    mem = Memory.open(
        f"sqlite:///{(tmp_path / 's.db').as_posix()}",
        settings=Settings(home=tmp_path, worker="off"),
    )
    try:
        cid = mem.conversations.create(ALICE).id
        said = mem.messages.append(ALICE, cid, role="user", content="Zebras run fast")
        indexes = [r[1] for r in _rows(mem, "PRAGMA index_list(recall_docs)")]
        # The one automatic index left is the (conversation_id, message_id) key's.
        assert [n for n in indexes if n.startswith("sqlite_autoindex")] == [
            "sqlite_autoindex_recall_docs_1"
        ]
        seq = [r for r in _rows(mem, "PRAGMA table_info(recall_docs)") if r[1] == "seq"]
        assert [(r[2], r[5]) for r in seq] == [("INTEGER", 1)]
        assert [h.message.id for h in mem.recall.search(ALICE, "zebras")] == [said.id]
    finally:
        mem.close()


def _stale_counts(mem: Memory) -> list[Any]:
    """Keyword rows whose token count is not their message's (none when exact)."""
    return _rows(
        mem,
        "SELECT d.seq FROM recall_docs d JOIN messages m ON m.seq = d.seq "
        "WHERE d.token_count <> m.token_count",
    )


def _search(mem: Memory, query: str) -> list[tuple[str, float]]:
    return [(h.message.id, h.score) for h in mem.recall.search(ALICE, query, k=10)]


def test_migration_31_fills_token_counts_and_search_is_unchanged(url: str, tmp_path: Path) -> None:
    settings = Settings(home=tmp_path, worker="off")
    mem = Memory.open(url, settings=settings)
    try:
        assert mem.core.engine.schema_version() >= 31
        cid = mem.conversations.create(ALICE).id
        mem.messages.append(ALICE, cid, role="user", content="My heron is called Pim.")
        mem.messages.append(
            ALICE, cid, role="assistant", content="A heron named Pim: noted, with pleasure."
        )
        mem.messages.append(ALICE, cid, role="user", content="Herons fish at dawn by the lake.")
        waiting = mem.messages.append(ALICE, cid, role="assistant", content="", status="pending")
        before = {q: _search(mem, q) for q in ("heron", "Pim the heron", "lake dawn")}
        assert all(before.values())
        assert _stale_counts(mem) == []

        _undo(mem, 31, "ALTER TABLE recall_docs DROP COLUMN token_count")
    finally:
        mem.close()
    mem = Memory.open(url, settings=settings)
    try:
        assert mem.core.engine.schema_version() == MIGRATIONS["sqlite"][-1].version
        assert _stale_counts(mem) == []
        assert _rows(mem, "SELECT count(*) FROM recall_docs WHERE token_count = 0") == [(0,)]
        for query, hits in before.items():
            assert _search(mem, query) == hits
        # Written from now on by appends and by a pending message's completion.
        mem.messages.complete(ALICE, cid, waiting.id, content="Pim caught a fish by the lake.")
        mem.messages.append(ALICE, cid, role="user", content="Does Pim like the lake?")
        assert mem.recall.search(ALICE, "lake", k=10)  # a read writes what waits (SQLite)
        assert _stale_counts(mem) == []
        assert len(_rows(mem, "SELECT seq FROM recall_docs")) == 5
    finally:
        mem.close()
