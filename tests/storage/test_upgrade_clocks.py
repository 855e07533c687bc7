"""Migration 15 (two clocks) on a store that has facts already: every fact gets its clocks
from what the store knows (recorded at creation; superseded when a non-active fact last
changed; valid from its earliest source message's occurred_at, else its creation; valid
until its replacement began), on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import pytest

from memstrata import Memory, Scope
from memstrata.backends.registry import applied_migrations
from memstrata.config import Settings
from memstrata.storage.plan import Exec, write
from memstrata.storage.records import to_micros
from memstrata.storage.schema import MIGRATIONS
from support import postgres_schema, postgres_url_for

ALICE = Scope("acme", "alice")
SAID = datetime(2025, 5, 1, tzinfo=UTC)  # when the user said it (occurred_at)
# When facts were created and changed (micros).
T_OLD, T_NEW, T_CHANGE = (
    to_micros(datetime(2025, 5, 2, tzinfo=UTC)),
    to_micros(datetime(2025, 6, 1, tzinfo=UTC)),
    to_micros(datetime(2025, 6, 2, tzinfo=UTC)),
)


@contextmanager
def _store_at(
    kind: str, version: int, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[str]:
    """A store URL whose migrations stop at ``version`` until ``monkeypatch.undo()``."""
    dialect = "sqlite" if kind == "sqlite" else "postgres"
    # With message positions (24) and parent seqs (26): today's append writes them.
    positions = tuple(
        m for m in MIGRATIONS[dialect] if m.version in (24, 26) and version < m.version
    )
    monkeypatch.setitem(MIGRATIONS, dialect, MIGRATIONS[dialect][:version] + positions)
    if kind == "sqlite":
        yield f"sqlite:///{(tmp_path / f'v{version}.db').as_posix()}"
    else:
        with postgres_schema() as schema:
            yield postgres_url_for(schema)


@pytest.fixture(params=["sqlite", "postgres"])
def store_at_14(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, pytest.MonkeyPatch]]:
    with _store_at(request.param, 14, tmp_path, monkeypatch) as url:
        yield url, monkeypatch


def _fact_row(
    fid: str, content: str, status: str, by: str | None, created: int, updated: int
) -> str:
    by_sql = "NULL" if by is None else f"'{by}'"
    return (
        "INSERT INTO facts (id, tenant_id, user_id, agent_id, content, content_key, category, "
        "confidence, status, origin, superseded_by, created_at, updated_at) VALUES "
        f"('{fid}', 'acme', 'alice', '', '{content}', '{content.lower()}', 'preference', 0.9, "
        f"'{status}', 'extracted', {by_sql}, {created}, {updated})"
    )


def test_migration_15_backfills_both_clocks(
    store_at_14: tuple[str, pytest.MonkeyPatch], tmp_path: Path
) -> None:
    url, monkeypatch = store_at_14
    settings = Settings(home=tmp_path, worker="off")
    # Recall's rows of today have columns and tables this old schema lacks: not written.
    old = Memory.open(url, settings=Settings(home=tmp_path, worker="off", recall_index=False))
    try:
        assert old.core.engine.schema_version() == 26
        cid = old.conversations.create(ALICE).id
        said = old.messages.append(ALICE, cid, role="user", content="I like tea", occurred_at=SAID)
        statements = [
            _fact_row("f-old", "likes tea", "superseded", "f-new", T_OLD, T_CHANGE),
            _fact_row("f-new", "likes coffee", "active", None, T_NEW, T_NEW),
            _fact_row("f-gone", "likes milk", "removed", None, T_OLD, T_CHANGE),
            "INSERT INTO fact_sources (fact_id, conversation_id, message_id) VALUES "
            f"('f-old', '{cid}', '{said.id}')",
            "INSERT INTO profile_sections (tenant_id, user_id, agent_id, section, summary, "
            f"updated_at) VALUES ('acme', 'alice', '', 'workContext', 'Nurse', {T_NEW})",
        ]

        def op() -> Any:
            for sql in statements:
                yield Exec(sql, ())

        old.core.engine.run(write(op))
    finally:
        old.close()
    monkeypatch.undo()
    mem = Memory.open(url, settings=settings)
    try:
        assert mem.core.engine.schema_version() >= 15
        facts = {f.id: f for f in mem.facts.list(ALICE, status="all").items}
        micros = {
            fid: tuple(
                None if t is None else to_micros(t)
                for t in (f.valid_from, f.valid_to, f.recorded_at, f.superseded_at)
            )
            for fid, f in facts.items()
        }
        said_at = to_micros(SAID)
        # Valid from what was said; until its replacement began (which is after, here).
        assert micros["f-old"] == (said_at, T_NEW, T_OLD, T_CHANGE)
        assert micros["f-new"] == (T_NEW, None, T_NEW, None)
        assert micros["f-gone"] == (T_OLD, T_CHANGE, T_OLD, T_CHANGE)
        assert [f.id for f in mem.facts.list(ALICE).items] == ["f-new"]
        # Bitemporal reads work on the backfilled rows: in mid-May tea held, as known now.
        mid_may, now = datetime(2025, 5, 15, tzinfo=UTC), datetime.now(UTC)
        assert [f.id for f in mem.facts.list(ALICE, as_of=mid_may, known_at=now).items] == ["f-old"]
        june = datetime(2025, 6, 1, tzinfo=UTC)
        assert [f.id for f in mem.facts.list(ALICE, as_of=june, known_at=now).items] == ["f-new"]
        [section] = [p for p in mem.longterm.profile(ALICE) if p.summary]
        assert section.valid_from is not None
        assert to_micros(section.valid_from) == T_NEW
        assert section.recorded_at == section.valid_from
    finally:
        mem.close()


@pytest.fixture(params=["sqlite", "postgres"])
def store_at_20(
    request: pytest.FixtureRequest, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> Iterator[tuple[str, pytest.MonkeyPatch]]:
    with _store_at(request.param, 20, tmp_path, monkeypatch) as url:
        yield url, monkeypatch


def test_migrations_21_22_keep_edits_of_facts_and_sections_made_before_them(
    store_at_20: tuple[str, pytest.MonkeyPatch], tmp_path: Path
) -> None:
    """Issue 28: a store at migration 20 upgrades (its facts and sections unchanged), and
    edits after the upgrade keep their earlier versions."""
    url, monkeypatch = store_at_20
    settings = Settings(home=tmp_path, worker="off")
    old = Memory.open(url, settings=settings)
    try:
        # 1..20, and the message positions (24) and parent seqs (26) today's appends write.
        assert applied_migrations(url) == {*range(1, 21), 24, 26}
        old.core.rt.clock = lambda: T_OLD
        fid = old.facts.add(ALICE, "likes tea").id

        def section() -> Any:
            yield Exec(
                "INSERT INTO profile_sections (tenant_id, user_id, agent_id, section, summary, "
                "updated_at, valid_from, recorded_at) VALUES (?, ?, '', ?, ?, ?, ?, ?)",
                ("acme", "alice", "workContext", "Nurse", T_OLD, T_OLD, T_OLD),
            )

        old.core.engine.run(write(section))
    finally:
        old.close()
    monkeypatch.undo()
    mem = Memory.open(url, settings=settings)
    try:
        assert {21, 22} <= (applied_migrations(url) or set())
        assert [f.content for f in mem.facts.list(ALICE).items] == ["likes tea"]
        mem.core.rt.clock = lambda: T_NEW
        mem.facts.edit(ALICE, fid, content="likes coffee")
        from memstrata.longterm import store

        rt = mem.core.rt
        mem.core.engine.run(write(lambda: store.set_profile(rt, ALICE, {"workContext": "Doctor"})))
        mid = datetime(2025, 5, 15, tzinfo=UTC)  # between T_OLD and T_NEW
        assert [f.content for f in mem.facts.list(ALICE, as_of=mid).items] == ["likes tea"]
        sections = {p.name: p.summary for p in mem.longterm.profile(ALICE, as_of=mid)}
        assert sections["workContext"] == "Nurse"
        assert {p.name: p.summary for p in mem.longterm.profile(ALICE)}["workContext"] == "Doctor"
    finally:
        mem.close()
