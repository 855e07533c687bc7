"""Migration 33 (SQLite): the keyword index whose tokens name their owner and word. A store
made before it gets its old index's rows carried over (a plain row's text stemmed behind its
owner's prefix, a sealed row's hashed tokens as they are), the old index goes, and every
search finds what it found before; one owner's words never match another's messages.
PostgreSQL's full-text column is left as it was: it still holds the words themselves."""

from __future__ import annotations

from pathlib import Path
from typing import Any

from memstrata import Memory, Scope
from memstrata.config import Settings
from memstrata.sealing import owner_prefix
from memstrata.storage.plan import Exec, Query, read, write
from memstrata.storage.recall_tables import RECALL_KEYWORDS
from memstrata.storage.schema import MIGRATIONS
from support import (
    old_owner_token,
    postgres_schema,
    postgres_url_for,
    sealed_settings,
    store_file,
)

ALICE = Scope("acme", "alice")
BOB = Scope("acme", "bob")
QUERIES = ("heron", "Pim the heron", "lake dawn", "café", "Herons fishing", "otter")


def _rows(mem: Memory, sql: str) -> list[Any]:
    def op() -> Any:
        return (yield Query(sql, ()))

    return list(mem.core.engine.run(read(op)))


def _undo_33(mem: Memory, fill: str) -> None:
    """Take the store back to what 32 left: the old index (filled by ``fill``, whose rows
    name their owner with the old token), no ``recall_terms``, no record of 33."""

    def op() -> Any:
        for statement in RECALL_KEYWORDS["sqlite"]:
            yield Exec(statement, ())
        for scope in (ALICE, BOB):
            yield Exec(fill.format(owner=old_owner_token(scope.tenant, scope.user)), (scope.user,))
        yield Exec("DROP TABLE recall_terms", ())
        yield Exec("DELETE FROM schema_migrations WHERE version = 33", ())

    mem.core.engine.run(write(op))


def _chat(mem: Memory) -> None:
    for scope, texts in (
        (
            ALICE,
            (
                "My heron is called Pim.",
                "Herons fish at dawn by the lake.",
                "We had a café au lait at the lake.",
                "Pim caught a fish (a big one) ⑴.",
            ),
        ),
        (BOB, ("An otter swims in my lake.", "The heron left at dawn.")),
    ):
        cid = mem.conversations.create(scope).id
        for text in texts:
            mem.messages.append(scope, cid, role="user", content=text)
    mem.recall.flush(ALICE)


def _searches(mem: Memory) -> dict[tuple[str, str], list[tuple[str, float]]]:
    return {
        (scope.user, q): [(h.message.id, h.score) for h in mem.recall.search(scope, q, k=10)]
        for scope in (ALICE, BOB)
        for q in QUERIES
    }


def _keyword_hits(mem: Memory, scope: Scope, query: str) -> set[str]:
    """The messages the keyword ranking found (``explain``'s signals name it)."""
    hits = mem.recall.search(scope, query, k=10, explain=True)
    return {h.message.content for h in hits if (h.signals or {}).get("keyword_rank") is not None}


def _upgrade_keeps_search(tmp_path: Path, settings: Settings, fill: str) -> Memory:
    url = f"sqlite:///{(tmp_path / 's.db').as_posix()}"
    mem = Memory.open(url, settings=settings)
    try:
        _chat(mem)
        before = _searches(mem)
        tokens = _rows(mem, "SELECT rowid, body FROM recall_terms ORDER BY rowid")
        assert len(tokens) == 6
        _undo_33(mem, fill)
    finally:
        mem.close()
    mem = Memory.open(url, settings=settings)
    assert mem.core.engine.schema_version() == MIGRATIONS["sqlite"][-1].version
    # The carried rows are the rows today's index writes; the old index is gone.
    assert _rows(mem, "SELECT rowid, body FROM recall_terms ORDER BY rowid") == tokens
    tables = {t for (t,) in _rows(mem, "SELECT name FROM sqlite_master WHERE type = 'table'")}
    assert "recall_fts" not in tables
    assert _searches(mem) == before
    return mem


def test_a_plain_store_is_carried_over_and_searches_alike(tmp_path: Path) -> None:
    # The old index held each message's text beside its owner's token.
    fill = (
        "INSERT INTO recall_fts (rowid, owner, body) SELECT d.seq, '{owner}', m.content "
        "FROM recall_docs d JOIN messages m ON m.conversation_id = d.conversation_id "
        "AND m.id = d.message_id WHERE d.user_id = ?"
    )
    mem = _upgrade_keeps_search(tmp_path, Settings(home=tmp_path, worker="off"), fill)
    try:
        with store_file(tmp_path / "s.db") as conn:
            bodies = [b for (b,) in conn.execute("SELECT body FROM recall_terms")]
        alice, bob = owner_prefix("acme", "alice"), owner_prefix("acme", "bob")
        assert all(
            all(t.startswith((alice, bob)) and t.isalnum() for t in b.split()) for b in bodies
        )
        assert f"{alice}heron" in " ".join(bodies)  # "Herons" and "heron" stem alike
        assert _keyword_hits(mem, ALICE, "herons") == {
            "My heron is called Pim.",
            "Herons fish at dawn by the lake.",
        }
        assert _keyword_hits(mem, ALICE, "cafe") == {"We had a café au lait at the lake."}
        # Each owner's words match their own messages only.
        assert _keyword_hits(mem, BOB, "heron") == {"The heron left at dawn."}
        assert _keyword_hits(mem, ALICE, "otter") == set()
    finally:
        mem.close()


def test_a_sealed_store_keeps_its_hashed_tokens(tmp_path: Path) -> None:
    settings = sealed_settings(tmp_path)
    # The old index held the hashed tokens themselves (today's rows, owner by owner).
    fill = (
        "INSERT INTO recall_fts (rowid, owner, body) SELECT t.rowid, '{owner}', t.body "
        "FROM recall_terms t JOIN recall_docs d ON d.seq = t.rowid WHERE d.user_id = ?"
    )
    mem = _upgrade_keeps_search(tmp_path, settings, fill)
    try:
        with store_file(tmp_path / "s.db") as conn:
            bodies = " ".join(b for (b,) in conn.execute("SELECT body FROM recall_terms"))
        assert "heron" not in bodies
        assert all(len(t) == 21 and t.startswith("h") for t in bodies.split())
        assert _keyword_hits(mem, ALICE, "herons") == {
            "My heron is called Pim.",
            "Herons fish at dawn by the lake.",
        }
        assert _keyword_hits(mem, BOB, "heron") == {"The heron left at dawn."}
    finally:
        mem.close()


def test_postgres_keeps_its_full_text_column_as_it_was(tmp_path: Path) -> None:
    with postgres_schema() as schema:
        mem = Memory.open(postgres_url_for(schema), settings=Settings(home=tmp_path, worker="off"))
        try:
            _chat(mem)
            vectors = " ".join(t for (t,) in _rows(mem, "SELECT tsv::text FROM recall_docs"))
            assert "'heron'" in vectors  # the English stem of the word itself, no prefix
            assert _keyword_hits(mem, ALICE, "herons") == {
                "My heron is called Pim.",
                "Herons fish at dawn by the lake.",
            }
            assert _keyword_hits(mem, BOB, "heron") == {"The heron left at dawn."}
        finally:
            mem.close()
