"""Upgrading a database made by an earlier memstrata: its data survives, every later
migration applies once, and the upgraded store passes the whole conformance suite.

``fixtures/memstrata-v6.db`` was written by memstrata at schema version 6 (before
long-term memory, request ids and key expiry): one conversation with a regenerated
answer, working memory, a plan and an API key. It is never edited; a later schema
gets a fixture of its own beside it.
"""

from __future__ import annotations

import shutil
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memstrata import Memory, Scope
from memstrata.api import core as core_module
from memstrata.api.features import FEATURES
from memstrata.config import Settings
from memstrata.conversation.messages import delete_message
from memstrata.errors import Conflict
from memstrata.storage.plan import Exec, Query, read, write
from memstrata.storage.recall_tables import RECALL_KEYWORDS
from memstrata.storage.schema import MIGRATIONS
from memstrata.testing import FakeEmbedder
from memstrata.testing.conformance import BackendConformance
from support import old_owner_token, postgres_schema, postgres_url_for, schema_on, store_file

FIXTURE = Path(__file__).parent.parent / "fixtures" / "memstrata-v6.db"
# The key the fixture's maker printed (a test-only tenant; it guards nothing).
OLD_KEY = "msk_57f2ef5524f7_d8251d09cf414d9819f6cbdd140675529b680bf90e5be7da9e803903841a2490"
ALICE = Scope("acme", "alice")
CAROL = Scope("other", "carol")


def _upgraded(tmp: Path) -> Memory:
    db = tmp / "old.db"
    shutil.copyfile(FIXTURE, db)
    return Memory.open(f"sqlite:///{db}", settings=Settings(home=tmp, worker="off"))


def test_the_fixture_is_at_version_6() -> None:
    with store_file(FIXTURE, readonly=True) as conn:
        assert conn.execute("SELECT max(version) FROM schema_migrations").fetchall() == [(6,)]


def test_an_old_database_upgrades_and_keeps_its_data(tmp_path: Path) -> None:
    mem = _upgraded(tmp_path)
    try:
        latest = MIGRATIONS["sqlite"][-1].version
        assert mem.core.engine.schema_version() == latest
        with store_file(tmp_path / "old.db") as conn:
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

_AFTER_13 = {"provenance", "usage"}  # features whose tables arrive after migration 13
# Later migrations the code of today cannot run without (message forks, vector versions,
# context prefixes, which a message delete clears, message positions, parent seqs, the
# token counts and the flush mark of recall's rows), applied to the old store first.
_EARLY = (19, 20, 23, 24, 26, 31, 32, 33, 34)


@pytest.fixture(
    params=[
        "sqlite",
        "postgres",
        pytest.param("pgvector", marks=pytest.mark.xdist_group("pgvector")),
    ]
)
def store_at_13(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, pytest.MonkeyPatch, bool]]:
    """A store URL whose migrations stop at 13 until ``monkeypatch.undo()``, and whether
    its vectors have a derived pgvector table."""
    dialect = "sqlite" if request.param == "sqlite" else "postgres"
    # Today's code writes messages and vectors with the tables of migrations 19 and 20
    # (forks, vector versions): the simulated old store has them already (neither touches
    # what 14-18 change), and its upgrade applies 14-18.
    early = tuple(m for m in MIGRATIONS[dialect] if m.version in _EARLY)
    monkeypatch.setitem(MIGRATIONS, dialect, MIGRATIONS[dialect][:13] + early)
    # Features whose tables come with a later migration stay off until the upgrade.
    monkeypatch.setattr(
        core_module, "FEATURES", tuple(f for f in FEATURES if f.name not in _AFTER_13)
    )
    if request.param == "sqlite":
        yield f"sqlite:///{(tmp_path / 'v13.db').as_posix()}", monkeypatch, False
    elif request.param == "postgres":
        with postgres_schema() as schema:
            yield postgres_url_for(schema), monkeypatch, False
    else:  # a derived HNSW table holds the vectors too
        url = request.getfixturevalue("pgvector_url")
        with schema_on(url) as schema:
            sep = "&" if "?" in url else "?"
            yield f"{url}{sep}options=-csearch_path%3D{schema}", monkeypatch, True


#: Migration 33 undone on SQLite: the old keyword index, filled as it was written then.
_OLD_KEYWORD_INDEX = (
    "DROP TABLE recall_terms",
    *RECALL_KEYWORDS["sqlite"],
    "INSERT INTO recall_fts (rowid, owner, body) SELECT d.seq, "
    f"'{old_owner_token(ALICE.tenant, ALICE.user)}', m.content FROM recall_docs d "
    "JOIN messages m ON m.conversation_id = d.conversation_id AND m.id = d.message_id",
)


def _write_rows(mem: Memory, *statements: str) -> None:
    def op() -> Any:
        for sql in statements:
            yield Exec(sql, ())

    mem.core.engine.run(write(op))


def _read_rows(mem: Memory, sql: str) -> list[tuple[Any, ...]]:
    def op() -> Any:
        rows = yield Query(sql, ())
        return [tuple(r) for r in rows]

    return list(mem.core.engine.run(read(op)))


def _vector_ids(mem: Memory) -> tuple[list[str], list[str]]:
    """The ids in ``vectors`` and in the derived index table (if the space has one)."""
    tables = _read_rows(mem, "SELECT index_table FROM vector_spaces")
    derived = [t for (t,) in tables if t is not None]
    rows = _read_rows(mem, f"SELECT id FROM {derived[0]}") if derived else []
    return sorted(r[0] for r in _read_rows(mem, "SELECT id FROM vectors")), sorted(
        r[0] for r in rows
    )


def _open_embedding(url: str, settings: Settings) -> Memory:
    mem = Memory.open(url, settings=settings)
    mem.core.recall.use(FakeEmbedder(16))
    return mem


def test_finding12_a_store_at_migration_13_upgrades(
    store_at_13: tuple[str, pytest.MonkeyPatch, bool], tmp_path: Path
) -> None:
    url, monkeypatch, hnsw = store_at_13
    settings = Settings(home=tmp_path, worker="off")
    old = _open_embedding(url, settings)
    try:
        applied = {v for (v,) in _read_rows(old, "SELECT version FROM schema_migrations")}
        assert applied == {*range(1, 14), *_EARLY}
        conv = old.conversations.create(ALICE)
        q = old.messages.append(ALICE, conv.id, role="user", content="Capital of Norway?")
        old.messages.append(ALICE, conv.id, role="assistant", content="Oslo.")
        old.messages.append(ALICE, conv.id, role="assistant", content="It is Oslo.", parent_id=q.id)
        dropped = old.messages.append(ALICE, conv.id, role="user", content="never mind")
        # The deletion itself (its receipt needs a table this old schema lacks).
        old.core.engine.run(write(lambda: delete_message(old.core.rt, ALICE, conv.id, dropped.id)))
        old.recall.flush(ALICE)
        stored = old.messages.list(ALICE, conv.id).items
        # Version 13 named a message's vector by the message id alone (derived rows too).
        derived = [t for (t,) in _read_rows(old, "SELECT index_table FROM vector_spaces") if t]
        assert bool(derived) is hnsw
        _write_rows(
            old, *[f"DELETE FROM {t}" for t in derived], "UPDATE vectors SET id = message_id"
        )
    finally:
        old.close()
    old = _open_embedding(url, settings)
    try:
        old.recall.search(ALICE, "Oslo")  # opening the index copies the rows back
        bare = sorted(m.id for m in stored)
        assert _vector_ids(old) == (bare, bare if derived else [])
        # Positions (24), parent seqs (26), recall's token counts (31), flush mark (32),
        # keyword index by owner and word (33) and node turns' erasure mark (34) came early
        # only for today's append and delete to run: take them away, so the upgrade adds
        # them after 14 (whose table rebuilds they would not survive). On SQLite the old keyword index gets its rows back as they
        # were written then (the owner's token beside the text), for 33 to carry over.
        _write_rows(
            old,
            "DROP INDEX messages_position",
            "ALTER TABLE messages DROP COLUMN position",
            "ALTER TABLE conversations DROP COLUMN last_position",
            "ALTER TABLE messages DROP COLUMN parent_seq",
            "ALTER TABLE recall_docs DROP COLUMN token_count",
            "DROP TABLE IF EXISTS recall_marks",
            "DROP INDEX node_turn_ids_erasing",
            "ALTER TABLE node_turn_ids DROP COLUMN erasing",
            *(_OLD_KEYWORD_INDEX if url.startswith("sqlite") else ()),
            "DELETE FROM schema_migrations WHERE version IN (24, 26, 31, 32, 33, 34)",
        )
    finally:
        old.close()
    monkeypatch.undo()
    mem = _open_embedding(url, settings)
    try:
        assert mem.core.engine.schema_version() == MIGRATIONS["sqlite"][-1].version >= 18
        assert mem.messages.list(ALICE, conv.id).items == stored
        # The regenerated answer starts a chain off the question's.
        regen = next(m for m in stored if m.content == "It is Oslo.")
        assert _read_rows(mem, "SELECT head_id, from_depth FROM message_forks") == [(regen.id, 0)]
        assert [m.content for m in mem.history(ALICE, conv.id).messages] == [
            "Capital of Norway?",
            "It is Oslo.",
        ]
        assert mem.recall.flush(ALICE) == 0  # nothing to embed again
        # Keywords and (all three) vectors; the answer regenerated away is off the active
        # branch, so only a search of every branch returns it.
        hits = mem.recall.search(ALICE, "Oslo", k=5, include_other_branches=True)
        assert sorted(h.message.content for h in hits) == sorted(m.content for m in stored)
        named = sorted(f"{conv.id}/{m.id}" for m in stored)
        assert _vector_ids(mem) == (named, named if derived else [])
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
