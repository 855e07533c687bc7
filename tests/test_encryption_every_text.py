"""Encryption at rest reaches every text of a user: titles, metadata (a speaker's name),
context records, iteration logs, the extraction log and LangGraph store items, besides the
kinds of ``test_encryption_at_rest``; ``memstrata encrypt --all`` seals each of them when
they were written in clear. On SQLite and PostgreSQL.
"""

from __future__ import annotations

import json
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memstrata import Memory
from memstrata.backup import backup_sqlite
from memstrata.config import Settings
from memstrata.errors import Conflict, NotFound
from memstrata.longterm.apply import UpdatePlan
from memstrata.longterm.store import apply_plan, lock_owner
from memstrata.longterm.updates import ExtractionRecord, record_update
from memstrata.sealing import is_sealed
from memstrata.storage.plan import Query, read, write
from memstrata.types import Scope
from support import POSTGRES_URL, postgres_available, postgres_schema, store_file
from test_encryption_at_rest import (
    ALICE,
    BOB,
    KINDS,
    assert_all_readable,
    canary,
    fill_state,
    open_pg,
    pg_rows_text,
    raw_home,
    read_state,
    restore_pg,
    settings,
)

needs_postgres = pytest.mark.skipif(not postgres_available(), reason="needs PostgreSQL")

#: One word per place: found anywhere in the raw store, that place leaked.
MORE = (
    "title",
    "convmeta",
    "speaker",
    "iterlog",
    "iterdetail",
    "record",
    "notes",
    "rawout",
    "lterror",
    "item",
    "reason",
    "srcerr",
)
BUDGET = 4000


def fill_more(mem: Memory, scope: Scope) -> tuple[str, str, str]:
    """A canary word in each of the places of :data:`MORE`, for ``scope``; returns the
    conversation id, the context record's id and a removed fact's id."""

    def w(kind: str) -> str:
        return canary(scope.user, kind)

    conv = mem.conversations.create(
        scope, title=f"trip {w('title')}", metadata={"topic": w("convmeta")}
    )
    mem.messages.append(
        scope,
        conv.id,
        role="user",
        content="where did we go last summer",
        metadata={"speaker": w("speaker")},
    )
    mem.iterations.append(
        scope,
        conv.id,
        "deploy",
        outcome="failed",
        error=f"timed out at {w('iterlog')}",
        detail={"host": w("iterdetail")},
    )
    ctx = mem.context(scope, conv.id, budget=BUDGET, task="deploy")
    # A reason is the free-form part of a record's report.
    ctx.report.dropped.append({"tier": "notes", "reason": f"too long: {w('record')}"})
    rid = mem.provenance.record(scope, conv.id, ctx, BUDGET)
    rec = ExtractionRecord(
        outcome="failed",
        conversation_id=conv.id,
        job_id=None,
        signals=("preference",),
        llm_calls=1,
        prompt_tokens=10,
        completion_tokens=5,
        counts={"added": 0},
        notes=(f"the user said {w('notes')}",),
        raw_output=f"{{not json {w('rawout')}",
        error=f"unparsable near {w('lterror')}",
    )
    rt = mem.core.rt
    mem.core.engine.run(write(lambda: record_update(rt, scope, rec)))
    mem.graphs.put_item(
        scope.tenant, ("memories", scope.user), "k1", {"data": f"likes {w('item')}", "kind": "n"}
    )
    fact = mem.facts.add(scope, "plays the oboe", source_error=f"source {w('srcerr')}")
    # Removed by an extraction, with the model's reason (on the fact and its history).
    plan = UpdatePlan(removed=[(fact.id, f"now plays {w('reason')}")])

    def remove():  # type: ignore[no-untyped-def]
        yield from lock_owner(rt, scope)
        yield from apply_plan(rt, scope, conv.id, plan, [])

    mem.core.engine.run(write(remove))
    return conv.id, rid, fact.id


def read_more(mem: Memory, scope: Scope, cid: str, rid: str, fid: str) -> dict[str, object]:
    """What ``scope`` reads back of each place (None or empty where it reads as absent)."""
    conv = mem.conversations.get(scope, cid)
    try:
        report = mem.provenance.record_of(scope, cid, rid).report
        record: object = [d.get("reason") for d in report["dropped"]]
    except NotFound:
        record = None
    ctx = mem.context(scope, cid, budget=BUDGET, task="deploy")
    (item,) = mem.graphs.get_items(scope.tenant, [(("memories", scope.user), "k1")])
    fact = mem.facts.get(scope, fid)
    return {
        "fact": (fact.reason, fact.source_error),
        "events": [e.reason for e in mem.facts.history(scope, fid)],
        "title": conv.title,
        "listed": [c.title for c in mem.conversations.list(scope).items],
        "convmeta": conv.metadata,
        "speaker": [m.metadata for m in mem.messages.list(scope, cid).items],
        "iterations": [(i.error, i.detail) for i in mem.iterations.list(scope, cid).items],
        "tier": [i.text for i in ctx.injected.get("iterations", [])],
        "record": record,
        "updates": [(u["notes"], u["raw_output"], u["error"]) for u in mem.longterm.updates(scope)],
        "item": None if item is None else item.value,
    }


def assert_more_readable(got: dict[str, object], user: str) -> None:
    w = {kind: canary(user, kind) for kind in MORE}
    assert got["title"] == f"trip {w['title']}"
    assert f"trip {w['title']}" in got["listed"]  # type: ignore[operator]
    assert got["convmeta"] == {"topic": w["convmeta"]}
    assert got["speaker"] == [{"speaker": w["speaker"]}]
    assert got["iterations"] == [(f"timed out at {w['iterlog']}", {"host": w["iterdetail"]})]
    tiers = got["tier"]
    assert isinstance(tiers, list)
    assert len(tiers) == 1
    tier: str = tiers[0]
    assert w["iterlog"] in tier
    assert w["iterdetail"] in tier
    assert got["record"][-1:] == [f"too long: {w['record']}"]  # type: ignore[index]
    assert got["updates"] == [
        (
            [f"the user said {w['notes']}"],
            f"{{not json {w['rawout']}",
            f"unparsable near {w['lterror']}",
        )
    ]
    assert got["item"] == {"data": f"likes {w['item']}", "kind": "n"}
    assert got["fact"] == (f"now plays {w['reason']}", f"source {w['srcerr']}")
    assert got["events"] == ["manual", f"now plays {w['reason']}"]


def assert_more_gone(got: dict[str, object]) -> None:
    """A deleted user's rows, back from a backup: nothing of theirs opens. (The store item
    is the tenant's, not the user's: see docs/operations.md.)"""
    assert got["title"] is None
    assert got["listed"] == [None]
    assert got["convmeta"] == {}
    assert got["speaker"] == [{}]
    assert got["iterations"] == [(None, {})]
    assert got["tier"] == ["Attempt 1 of task 'deploy' (failed)"]
    assert got["record"] is None
    assert got["updates"] == [([], None, None)]
    assert got["fact"] == ("", None)
    assert got["events"] == [None, None]


def leaks(raw: str | bytes, users: tuple[str, ...], kinds: tuple[str, ...]) -> list[str]:
    """The canary words of ``users`` and ``kinds`` found in ``raw`` (as text, or as the hex
    PostgreSQL prints a bytea in)."""
    out = []
    for user in users:
        for kind in kinds:
            word = canary(user, kind)
            if isinstance(raw, bytes):
                if word.encode() in raw:
                    out.append(word)
            elif word in raw or word.encode().hex() in raw:
                out.append(word)
    return out


def store_search_works(mem: Memory, user: str) -> None:
    """LangGraph's store still filters and matches sealed values (in memory, once opened)."""
    pytest.importorskip("langgraph")
    from memstrata.integrations.langgraph import MemstrataStore

    store = MemstrataStore(mem, "acme")
    namespace = ("memories", user)
    word = canary(user, "item")
    assert [i.key for i in store.search(namespace, filter={"kind": "n"})] == ["k1"]
    assert store.search(namespace, filter={"kind": "other"}) == []
    assert [i.key for i in store.search(namespace, query=word)] == ["k1"]


@pytest.fixture
def home(tmp_path: Path) -> Path:  # the store's home (database, blobs, keyring, master key)
    return tmp_path


# -- SQLite ------------------------------------------------------------------------------------


def test_every_text_is_sealed_works_and_is_forgotten_after_restore(home: Path) -> None:
    s = settings(home)
    mem = Memory.open(settings=s)
    alice = fill_more(mem, ALICE)
    bob = fill_more(mem, BOB)
    assert_more_readable(read_more(mem, ALICE, *alice), "alice")
    # Sealed, the features still work: the speaker's name is a keyword hit (hashed terms),
    # and the store filters and matches values.
    hits = mem.recall.search(ALICE, canary("alice", "speaker"))
    assert [h.message.conversation_id for h in hits] == [alice[0]]
    store_search_works(mem, "alice")
    rows = mem.core.engine.run(
        read(lambda: (yield Query("SELECT title, metadata FROM conversations")))
    )
    assert all(is_sealed(v) for r in rows for v in r)
    raw = raw_home(home)
    backup = home / "backup.db"
    backup_sqlite(home / "memstrata.db", backup)
    mem.users.delete(ALICE)
    mem.close()
    raw += raw_home(home)
    assert leaks(raw, ("alice", "bob"), MORE) == []
    for f in home.glob("memstrata.db*"):
        f.unlink()
    shutil.copy(backup, home / "memstrata.db")
    mem = Memory.open(settings=s)
    try:
        got = read_more(mem, ALICE, *alice)
        assert_more_gone(got)
        assert got["item"] == {"data": f"likes {canary('alice', 'item')}", "kind": "n"}
        assert mem.recall.search(ALICE, canary("alice", "speaker")) == []
        assert_more_readable(read_more(mem, BOB, *bob), "bob")
    finally:
        mem.close()


def test_moved_title_metadata_or_item_does_not_open(home: Path) -> None:
    from memstrata.errors import Corruption
    from memstrata.storage.plan import Exec

    mem = Memory.open(settings=settings(home))
    try:
        (a, _, _), (b, _, _) = fill_more(mem, ALICE), fill_more(mem, BOB)

        def move(table: str, column: str, key: str, src: str, dst: str) -> None:
            def op():  # type: ignore[no-untyped-def]
                rows = yield Query(f"SELECT {column} FROM {table} WHERE {key} = ?", (src,))
                assert is_sealed(rows[0][0])
                yield Exec(f"UPDATE {table} SET {column} = ? WHERE {key} = ?", (rows[0][0], dst))

            mem.core.engine.run(write(op))

        move("conversations", "title", "id", a, b)  # another user's conversation
        with pytest.raises(Corruption):
            mem.conversations.get(BOB, b)
        mem.graphs.put_item("acme", ("memories", "bob"), "k2", {"data": "other"})
        move("graph_items", "value", "item_key", "k1", "k2")  # same tenant, another key
        with pytest.raises(Corruption):
            mem.graphs.get_items("acme", [(("memories", "bob"), "k2")])
    finally:
        mem.close()


def test_with_encryption_off_every_text_is_plain(home: Path) -> None:
    """The scan above can fail: the same places written with encryption off are found."""
    mem = Memory.open(settings=Settings(home=home, worker="off"))
    try:
        ids = fill_more(mem, ALICE)
        assert_more_readable(read_more(mem, ALICE, *ids), "alice")
        store_search_works(mem, "alice")
        assert sorted(leaks(raw_home(home), ("alice",), MORE)) == sorted(
            canary("alice", k) for k in MORE
        )
        rows = mem.core.engine.run(read(lambda: (yield Query("SELECT title FROM conversations"))))
        assert rows[0][0] == f"trip {canary('alice', 'title')}"
    finally:
        mem.close()


def _cli_env(home: Path, s: Settings) -> dict[str, str | None]:
    return {
        "MEMSTRATA_HOME": str(home),
        "MEMSTRATA_DB": None,
        "MEMSTRATA_ENCRYPT_AT_REST": "true",
        "MEMSTRATA_MASTER_KEY_FILE": str(s.master_key_file),
        "MEMSTRATA_KEYRING": str(home / "keyring"),
    }


def test_encrypt_all_reaches_every_text_written_in_clear(home: Path) -> None:
    from typer.testing import CliRunner

    from memstrata.cli import app

    plain = Memory.open(settings=Settings(home=home, worker="off"))
    state = fill_state(plain, ALICE)
    more = fill_more(plain, ALICE)
    plain.close()
    before = raw_home(home)
    assert len(leaks(before, ("alice",), (*KINDS, *MORE))) == len(KINDS) + len(MORE)
    s = settings(home)
    runner = CliRunner()
    report = json.loads(runner.invoke(app, ["doctor", "--json"], env=_cli_env(home, s)).stdout)
    assert report["encryption"]["plain_values"] > 0
    assert any("encrypt --all" in w for w in report["encryption"]["warnings"])
    first = runner.invoke(app, ["encrypt", "--all", "--batch", "2"], env=_cli_env(home, s))
    assert first.exit_code == 0, (first.stderr, first.exception)
    for name in (
        "conversations.title",
        "conversations.metadata",
        "profile_sections.summary",
        "profile_section_versions.summary",
        "summaries.content",
        "working_memory.content",
        "plans.document",
        "run_snapshots.data",
        "checkpoints.state",
        "iteration_logs.error",
        "iteration_logs.detail",
        "context_records.report",
        "longterm_updates.notes",
        "facts.reason",
        "facts.source_error",
        "fact_events.reason",
        "graph_checkpoints.checkpoint",
        "graph_writes.value",
        "graph_items.value",
    ):
        assert f"value(s) of {name} in" in first.stdout, name
        assert f"sealed 0 value(s) of {name}" not in first.stdout, name
    again = runner.invoke(app, ["encrypt", "--all"], env=_cli_env(home, s))
    assert again.exit_code == 0, again.stderr
    assert "sealed 0 node memory object(s)" not in first.stdout
    # The unkeyed prefix chain of fill_more's context is gone; none was made since.
    assert "forgot 0 context prefix chain(s)" not in first.stdout
    assert "sealed 0 of" in again.stdout
    assert all(
        line.startswith(("sealed 0 ", "forgot 0 ")) for line in again.stdout.splitlines() if line
    ), again.stdout
    report = json.loads(runner.invoke(app, ["doctor", "--json"], env=_cli_env(home, s)).stdout)
    assert (report["encryption"]["plain_messages"], report["encryption"]["plain_values"]) == (0, 0)
    assert report["encryption"]["warnings"] == []
    with store_file(home / "memstrata.db") as conn:
        conn.execute("VACUUM")
    assert leaks(raw_home(home), ("alice",), (*KINDS, *MORE)) == []
    mem = Memory.open(settings=s)
    try:
        assert_all_readable(read_state(mem, ALICE, state), "alice")
        assert_more_readable(read_more(mem, ALICE, *more), "alice")
        store_search_works(mem, "alice")
    finally:
        mem.close()


# -- PostgreSQL --------------------------------------------------------------------------------


@pytest.fixture
def pg() -> Iterator[str]:
    """A PostgreSQL schema of its own for the test."""
    with postgres_schema() as name:
        yield name


@needs_postgres
def test_postgres_every_text_is_sealed_and_forgotten_after_restore(home: Path, pg: str) -> None:
    s = settings(home)
    mem = open_pg(pg, s)
    alice = fill_more(mem, ALICE)
    bob = fill_more(mem, BOB)
    assert_more_readable(read_more(mem, ALICE, *alice), "alice")
    store_search_works(mem, "alice")
    dump = home / "dump.sql"
    subprocess.run(["pg_dump", "-n", pg, "-f", str(dump), POSTGRES_URL], check=True)
    assert leaks(pg_rows_text(pg) + dump.read_text(), ("alice", "bob"), MORE) == []
    assert mem.users.delete(ALICE).receipt.key_destroyed is True
    mem.close()
    restore_pg(pg, dump)
    mem = open_pg(pg, s)
    try:
        assert_more_gone(read_more(mem, ALICE, *alice))
        assert_more_readable(read_more(mem, BOB, *bob), "bob")
    finally:
        mem.close()


def seal_all(mem: Memory, batch: int = 2) -> int:
    """What ``memstrata encrypt --all`` runs, through ``mem.admin``; the values sealed."""
    from memstrata.transfer.seal import (
        COLUMNS,
        merge_keyword_index,
        seal_column,
        seal_facts,
        seal_messages,
    )

    admin, total = mem.admin, 0
    after = 0
    while True:
        after, n, done = admin.write(seal_messages, admin.dialect, after, batch)
        total += done
        if not n:
            break
    admin.write(merge_keyword_index, admin.dialect)
    after = 0
    while True:
        after, n, done = admin.write(seal_facts, after, batch)
        total += done
        if not n:
            break
    for spec in COLUMNS:
        last: Any = None
        while True:
            last, n, done = admin.write(seal_column, spec, last, batch)
            total += done
            if not n:
                break
    return total + admin.seal_node_objects()


@needs_postgres
def test_postgres_encrypt_all_reaches_every_text_written_in_clear(home: Path, pg: str) -> None:
    plain = open_pg(pg, Settings(home=home, worker="off"))
    state = fill_state(plain, ALICE)
    more = fill_more(plain, ALICE)
    plain.close()
    db_kinds = tuple(k for k in KINDS if k != "node")  # node memory: in the blob store
    rows = pg_rows_text(pg)
    assert len(leaks(rows, ("alice",), (*db_kinds, *MORE))) == len(db_kinds) + len(MORE)
    assert leaks(raw_home(home), ("alice",), ("node",)) == [canary("alice", "node")]
    s = settings(home)
    mem = open_pg(pg, s)
    try:
        from memstrata.transfer.seal import clear_values

        assert len(mem.admin.read(clear_values)) > 10  # what doctor counts, on PostgreSQL
        assert seal_all(mem) > 0
        assert seal_all(mem) == 0  # resumable: nothing left in clear
        assert mem.admin.read(clear_values) == {}
        assert leaks(pg_rows_text(pg), ("alice",), (*db_kinds, *MORE)) == []
        assert leaks(raw_home(home), ("alice",), ("node",)) == []
        assert_all_readable(read_state(mem, ALICE, state), "alice")
        assert_more_readable(read_more(mem, ALICE, *more), "alice")
    finally:
        mem.close()


def test_a_consolidation_is_undone_by_its_marker_when_sealed(home: Path) -> None:
    mem = Memory.open(settings=settings(home))
    try:
        keep = mem.facts.add(ALICE, "User prefers dark roast coffee").id
        dup = mem.facts.add(ALICE, "user prefers dark-roast coffee!").id
        applied = mem.memory.consolidate(ALICE, dry_run=False)
        assert [c.target_id for c in applied.changes] == [keep]
        reason = mem.facts.get(ALICE, dup).reason
        assert reason is not None
        assert reason.startswith(f"consolidation {applied.id}: ")
        rows = mem.core.engine.run(
            read(lambda: (yield Query("SELECT reason FROM facts WHERE id = ?", (dup,))))
        )
        stored = rows[0][0]
        assert stored.startswith(f"consolidation {applied.id}: \x1bms1:")  # the words sealed
        assert mem.memory.revert(ALICE, applied.id).restored == (dup,)
        assert mem.facts.get(ALICE, dup).status.value == "active"
        # The restored event holds the fact's words, sealed once (it read back as ciphertext
        # when the stored value was sealed a second time).
        restored = [e for e in mem.facts.history(ALICE, dup) if e.event == "restored"]
        assert [e.content for e in restored] == ["user prefers dark-roast coffee!"]
    finally:
        mem.close()


def test_a_revert_that_would_repeat_an_active_fact_is_refused_when_sealed(home: Path) -> None:
    """The twin test compares the restored fact's words, not its ciphertext."""
    mem = Memory.open(settings=settings(home))
    try:
        mem.facts.add(ALICE, "User prefers dark roast coffee")
        dup = mem.facts.add(ALICE, "user prefers dark-roast coffee!").id
        applied = mem.memory.consolidate(ALICE, dry_run=False)
        twin = mem.facts.add(ALICE, "user prefers dark-roast coffee!").id
        with pytest.raises(Conflict, match=twin):
            mem.memory.revert(ALICE, applied.id)
        assert mem.facts.get(ALICE, dup).status.value == "superseded"
    finally:
        mem.close()
