"""Upgrading a database made by an earlier memstrata: its data survives, every later
migration applies once, and the upgraded store passes the whole conformance suite.

``fixtures/memstrata-v6.db`` was written by memstrata at schema version 6 (before
long-term memory, request ids and key expiry): one conversation with a regenerated
answer, working memory, a plan and an API key. It is never edited; a later schema
gets a fixture of its own beside it.
"""

from __future__ import annotations

import shutil
import sqlite3
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memstrata import Memory, Scope
from memstrata.config import Settings
from memstrata.errors import Conflict
from memstrata.storage.plan import Exec, Query, read, write
from memstrata.storage.schema import MIGRATIONS
from memstrata.testing import FakeEmbedder
from memstrata.testing.conformance import BackendConformance
from support import postgres_schema, postgres_url_for

FIXTURE = Path(__file__).parent / "fixtures" / "memstrata-v6.db"
# The key the fixture's maker printed (a test-only tenant; it guards nothing).
OLD_KEY = "msk_57f2ef5524f7_d8251d09cf414d9819f6cbdd140675529b680bf90e5be7da9e803903841a2490"
ALICE = Scope("acme", "alice")
CAROL = Scope("other", "carol")


def _upgraded(tmp: Path) -> Memory:
    db = tmp / "old.db"
    shutil.copyfile(FIXTURE, db)
    return Memory.open(f"sqlite:///{db}", settings=Settings(home=tmp, worker="off"))


def test_the_fixture_is_at_version_6() -> None:
    with sqlite3.connect(f"file:{FIXTURE}?mode=ro", uri=True) as conn:
        assert conn.execute("SELECT max(version) FROM schema_migrations").fetchone() == (6,)


def test_an_old_database_upgrades_and_keeps_its_data(tmp_path: Path) -> None:
    mem = _upgraded(tmp_path)
    try:
        latest = MIGRATIONS["sqlite"][-1].version
        assert mem.core.engine.schema_version() == latest
        with sqlite3.connect(tmp_path / "old.db") as conn:
            applied = conn.execute("SELECT version FROM schema_migrations ORDER BY version")
            assert [r[0] for r in applied] == [m.version for m in MIGRATIONS["sqlite"]]
        [conv] = mem.conversations.list(ALICE).items
        assert conv.title == "before the upgrade"
        leaves = mem.messages.leaves(ALICE, conv.id).items
        assert sorted(m.content for m in leaves) == ["It is Oslo.", "Stockholm."]
        h = mem.history(ALICE, conv.id)
        assert [m.content for m in h.messages] == [
            "What is the capital of Norway?",
            "Oslo.",
            "And of Sweden?",
            "Stockholm.",
        ]
        assert mem.working.get(ALICE).content == "name: Alice"
        assert mem.plans.get(ALICE, conv.id).document == {"steps": ["answer", "check"]}
        principal = mem.keys.authenticate(OLD_KEY)
        assert principal is not None
        assert (principal.tenant, principal.user) == ("acme", "alice")
        # The new features work on old data.
        mem.facts.add(ALICE, "Lives in Oslo")
        assert [f.content for f in mem.facts.list(ALICE).items] == ["Lives in Oslo"]
        mem.conversations.delete(ALICE, conv.id)
    finally:
        mem.close()
    # Opening again applies nothing twice.
    again = Memory.open(f"sqlite:///{tmp_path / 'old.db'}", settings=Settings(home=tmp_path))
    try:
        assert again.core.engine.schema_version() == MIGRATIONS["sqlite"][-1].version
    finally:
        again.close()


class TestUpgradedDatabase(BackendConformance):
    """The whole conformance suite on a store that started at schema version 6."""

    @pytest.fixture
    def memory(self, tmp_path: Path) -> Iterator[Memory]:
        mem = _upgraded(tmp_path)
        yield mem
        mem.close()


# -- migration 14: message ids per conversation (issue 21, finding 12) ------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def store_at_13(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, pytest.MonkeyPatch]]:
    """A store URL whose migrations stop at 13 until ``monkeypatch.undo()``."""
    dialect = "sqlite" if request.param == "sqlite" else "postgres"
    monkeypatch.setitem(MIGRATIONS, dialect, MIGRATIONS[dialect][:13])
    if request.param == "sqlite":
        yield f"sqlite:///{(tmp_path / 'v13.db').as_posix()}", monkeypatch
        return
    with postgres_schema() as schema:
        yield postgres_url_for(schema), monkeypatch


def _write_rows(mem: Memory, sql: str) -> None:
    def op() -> Any:
        yield Exec(sql, ())

    mem.core.engine.run(write(op))


def _read_rows(mem: Memory, sql: str) -> list[tuple[Any, ...]]:
    def op() -> Any:
        rows = yield Query(sql, ())
        return [tuple(r) for r in rows]

    return list(mem.core.engine.run(read(op)))


def test_finding12_a_store_at_migration_13_upgrades(
    store_at_13: tuple[str, pytest.MonkeyPatch], tmp_path: Path
) -> None:
    url, monkeypatch = store_at_13
    settings = Settings(home=tmp_path, worker="off")
    old = Memory.open(url, settings=settings)
    try:
        assert old.core.engine.schema_version() == 13
        old.core.recall.use(FakeEmbedder(16))
        conv = old.conversations.create(ALICE)
        q = old.messages.append(ALICE, conv.id, role="user", content="Capital of Norway?")
        old.messages.append(ALICE, conv.id, role="assistant", content="Oslo.")
        old.messages.append(ALICE, conv.id, role="assistant", content="It is Oslo.", parent_id=q.id)
        dropped = old.messages.append(ALICE, conv.id, role="user", content="never mind")
        old.messages.delete(ALICE, conv.id, dropped.id)
        old.recall.flush(ALICE)
        _write_rows(old, "UPDATE vectors SET id = message_id")  # how version 13 named them
        stored = old.messages.list(ALICE, conv.id).items
    finally:
        old.close()
    monkeypatch.undo()
    mem = Memory.open(url, settings=settings)
    try:
        assert mem.core.engine.schema_version() == MIGRATIONS["sqlite"][-1].version == 14
        assert mem.messages.list(ALICE, conv.id).items == stored
        assert [m.content for m in mem.history(ALICE, conv.id).messages] == [
            "Capital of Norway?",
            "It is Oslo.",
        ]
        assert sorted(_read_rows(mem, "SELECT id FROM vectors")) == sorted(
            (f"{conv.id}/{m.id}",) for m in stored
        )
        mem.core.recall.use(FakeEmbedder(16))
        assert mem.recall.flush(ALICE) == 0  # nothing to embed again
        hits = mem.recall.search(ALICE, "Oslo", k=5)  # keywords and (all three) vectors
        assert sorted(h.message.content for h in hits) == sorted(m.content for m in stored)
        # Stored ids keep their idempotency; another scope may now use them.
        assert mem.messages.put(ALICE, conv.id, id=q.id, role="user", content=q.content)[1] is False
        with pytest.raises(Conflict):
            mem.messages.put(ALICE, conv.id, id=q.id, role="user", content="other")
        theirs = mem.conversations.create(CAROL)
        _, created = mem.messages.put(CAROL, theirs.id, id=q.id, role="user", content="mine")
        assert created is True
        # Server order goes on past every seq ever handed out (a deleted one included).
        newer = mem.messages.append(ALICE, conv.id, role="user", content="And Sweden?")
        assert newer.seq > dropped.seq
        mem.messages.delete(ALICE, conv.id, q.id)
        assert [m.content for m in mem.history(CAROL, theirs.id).messages] == ["mine"]
    finally:
        mem.close()
