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

import pytest

from memstrata import Memory, Scope
from memstrata.config import Settings
from memstrata.storage.schema import MIGRATIONS
from memstrata.testing.conformance import BackendConformance

FIXTURE = Path(__file__).parent.parent / "fixtures" / "memstrata-v6.db"
# The key the fixture's maker printed (a test-only tenant; it guards nothing).
OLD_KEY = "msk_57f2ef5524f7_d8251d09cf414d9819f6cbdd140675529b680bf90e5be7da9e803903841a2490"
ALICE = Scope("acme", "alice")


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
