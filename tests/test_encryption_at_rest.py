"""Encryption at rest: per-user data keys, so deleting a user reaches every earlier backup.

On SQLite and PostgreSQL: nothing of a user's words in the raw store (database file and
WAL; every table's rows), the delete-then-restore round trip, a wrong or missing master
key, and ciphertext moved to another row or user.
"""

from __future__ import annotations

import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from memstrata import Memory
from memstrata.api.core import Core
from memstrata.backup import backup_sqlite
from memstrata.config import Settings
from memstrata.errors import Corruption, MemstrataError
from memstrata.keyring import create_master_key, rotate_master_key
from memstrata.runtime import Limits, Runtime
from memstrata.sealing import KeyringError, is_sealed
from memstrata.storage.plan import Exec, Query, read, write
from memstrata.tokens import get_tokenizer
from memstrata.types import Scope
from support import POSTGRES_URL, postgres_available, postgres_schema, store_file

ALICE = Scope("acme", "alice")
BOB = Scope("acme", "bob")
# Words no fixture text holds: found anywhere in the raw store, they leaked.
ALICE_WORDS = "quixotrellis zephyrbloom marmalopod"
BOB_WORDS = "glimmerwharf tundrascope"

needs_postgres = pytest.mark.skipif(not postgres_available(), reason="needs PostgreSQL")


def settings(home: Path, **extra: object) -> Settings:
    key = home / "master.key"
    if not key.exists():
        create_master_key(key)
    values: dict[str, object] = {
        "home": home,
        "worker": "off",
        "encrypt_at_rest": True,
        "master_key_file": key,
        "keyring": str(home / "keyring"),
        **extra,
    }
    return Settings(**values)  # type: ignore[arg-type]


def open_pg(schema: str, s: Settings) -> Memory:
    from memstrata.backends.postgres import PostgresEngine

    engine = PostgresEngine(POSTGRES_URL, schema=schema, max_size=2)
    rt = Runtime(tokenizer=get_tokenizer(s.token_encoding), limits=Limits(max_content_bytes=10**6))
    return Memory(Core(engine, rt, s))


def fill(mem: Memory) -> dict[str, str]:
    """Alice and Bob each say something; returns each one's conversation id."""
    out = {}
    for scope, words in ((ALICE, ALICE_WORDS), (BOB, BOB_WORDS)):
        conv = mem.conversations.create(scope)
        mem.messages.append(scope, conv.id, role="user", content=f"I keep {words} at home")
        mem.messages.append(scope, conv.id, role="assistant", content=f"Noted: {words}.")
        out[scope.user] = conv.id
    return out


def texts(mem: Memory, scope: Scope, cid: str) -> list[str]:
    return [m.content for m in mem.messages.list(scope, cid).items]


def found(mem: Memory, scope: Scope, query: str) -> set[str]:
    return {h.message.content for h in mem.recall.search(scope, query)}


def pg_rows_text(schema: str) -> str:
    """Every row of every table of ``schema``, as PostgreSQL prints it."""
    import psycopg

    out: list[str] = []
    with psycopg.connect(POSTGRES_URL) as conn:
        tables = conn.execute(
            "SELECT table_name FROM information_schema.tables WHERE table_schema = %s",
            (schema,),
        ).fetchall()
        for (table,) in tables:
            rows = conn.execute(f'SELECT t::text FROM "{schema}"."{table}" t').fetchall()
            out.extend(r[0] for r in rows)
    return "\n".join(out)


def restore_pg(schema: str, dump: Path) -> None:
    """Replace ``schema`` with what a ``pg_dump`` of it held."""
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f"DROP SCHEMA {schema} CASCADE")
    subprocess.run(
        ["psql", "-q", "-v", "ON_ERROR_STOP=1", "-f", str(dump), POSTGRES_URL],
        check=True,
        capture_output=True,
    )


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path


# -- SQLite ------------------------------------------------------------------------------------


def test_clear_text_starting_with_escape_reads_back_with_encryption_off() -> None:
    """A sealed value starts with ESC, and so does a terminal's coloured output: such a
    clear text is stored and read as it is, with no sealer asked for."""
    coloured = "\x1b[32mok\x1b[0m all tests passed"
    with Memory.open() as mem:
        scope = Scope("t", "u")
        cid = mem.conversations.create(scope).id
        mem.messages.append(scope, cid, role="user", content="run the tests")
        sent = mem.messages.append(
            scope, cid, role="assistant", content=coloured, metadata={"k": "\x1b"}
        )
        assert sent.content == coloured
        assert mem.messages.get(scope, cid, sent.id).content == coloured
        assert [m.content for m in mem.history(scope, cid).messages][-1] == coloured
        assert mem.messages.append(scope, cid, role="user", content="\x1b").content == "\x1b"


@pytest.mark.parametrize("encrypted", [False, True], ids=["off", "on"])
def test_a_text_starting_with_the_seal_mark_is_refused(home: Path, encrypted: bool) -> None:
    """Stored clear, a text that starts with the whole mark of a sealed value would read
    back as one (a KeyringError with encryption off): it is refused before anything is
    written, whichever way the store runs, and its near misses are kept as they are."""
    mark = "\x1bms1:"
    s = settings(home) if encrypted else Settings(home=home, worker="off")
    with Memory.open(settings=s) as mem:
        scope = Scope("t", "u")
        cid = mem.conversations.create(scope).id
        kept = mem.messages.append(scope, cid, role="user", content="before")
        for attempt in (
            lambda: mem.messages.append(scope, cid, role="user", content=mark + "k:abc"),
            lambda: mem.facts.add(scope, mark + "likes tea"),
            lambda: mem.conversations.create(scope, title=mark),
        ):
            with pytest.raises(MemstrataError) as caught:
                attempt()
            assert caught.value.code == "invalid_input", caught.value
            assert "ESC 'ms1:'" in caught.value.message
        assert [m.id for m in mem.history(scope, cid).messages] == [kept.id]
        assert mem.conversations.get(scope, cid).message_count == 1
        assert mem.facts.list(scope).items == []
        assert [c.id for c in mem.conversations.list(scope).items] == [cid]
        for near in ("\x1bms1", "\x1bms2:x", " " + mark):
            assert mem.messages.append(scope, cid, role="user", content=near).content == near


def test_a_native_export_of_an_encrypted_store_imports_back_with_its_keyring(
    home: Path,
) -> None:
    """docs/operations.md, Exports: the sealed values cross as stored, with no key in the
    export, and open again in a store of the same keyring."""
    s = settings(home)
    lines: list[str] = []
    with Memory.open(f"sqlite:///{(home / 'a.db').as_posix()}", settings=s) as a:
        cid = a.conversations.create(ALICE, title="trip plans").id
        a.messages.append(ALICE, cid, role="user", content=f"I keep {ALICE_WORDS} at home")
        a.facts.add(ALICE, "User keeps a violin at home")
        a.transfer.export(lines.append)
    exported = "\n".join(lines)
    assert ALICE_WORDS not in exported
    assert "trip plans" not in exported
    assert "violin" not in exported
    assert "\\u001bms1:" in exported or "\x1bms1:" in exported  # sealed, as stored
    with Memory.open(f"sqlite:///{(home / 'b.db').as_posix()}", settings=s) as b:
        b.transfer.import_(lines)
        assert texts(b, ALICE, cid) == [f"I keep {ALICE_WORDS} at home"]
        assert b.conversations.get(ALICE, cid).title == "trip plans"
        assert [f.content for f in b.facts.list(ALICE).items] == ["User keeps a violin at home"]
        assert cid in {h.conversation_id for h in b.recall.search(ALICE, ALICE_WORDS)}


def test_sqlite_files_and_wal_hold_no_plain_text(home: Path) -> None:
    mem = Memory.open(settings=settings(home))
    ids = fill(mem)
    assert texts(mem, ALICE, ids["alice"]) == [
        f"I keep {ALICE_WORDS} at home",
        f"Noted: {ALICE_WORDS}.",
    ]
    assert f"I keep {ALICE_WORDS} at home" in found(mem, ALICE, "zephyrbloom")
    assert not any("zephyrbloom" in t for t in found(mem, BOB, "zephyrbloom"))
    # The WAL is scanned while the store is open, the main file once it is checkpointed.
    raw = b"".join(p.read_bytes() for p in home.glob("memstrata.db*"))
    mem.close()
    raw += (home / "memstrata.db").read_bytes()
    for word in (ALICE_WORDS + " " + BOB_WORDS).split():
        assert word.encode() not in raw, word
    # The encryption is real: the same store opened without the keyring holds ciphertext.
    assert b"\x1bms1:" in raw


def test_delete_then_restore_an_earlier_backup(home: Path) -> None:
    s = settings(home)
    mem = Memory.open(settings=s)
    ids = fill(mem)
    backup = home / "backup.db"
    backup_sqlite(home / "memstrata.db", backup)
    assert not list(home.glob("backup*/keyring*"))
    deleted = mem.users.delete(ALICE)
    assert deleted.receipt.key_destroyed is True
    assert mem.receipts.get(ALICE.tenant, deleted.receipt.id).key_destroyed is True
    mem.close()
    for f in home.glob("memstrata.db*"):
        f.unlink()
    shutil.copy(backup, home / "memstrata.db")  # restored, with today's keyring
    mem = Memory.open(settings=s)
    try:
        # Alice's rows came back with the backup, but nothing of what she said opens.
        assert texts(mem, ALICE, ids["alice"]) == ["", ""]
        assert mem.recall.search(ALICE, "zephyrbloom marmalopod") == []
        assert mem.recall.search(ALICE, "home") == []
        assert texts(mem, BOB, ids["bob"]) == [
            f"I keep {BOB_WORDS} at home",
            f"Noted: {BOB_WORDS}.",
        ]
        assert f"I keep {BOB_WORDS} at home" in found(mem, BOB, "glimmerwharf")
        # Alice may come back as someone new, under a new key.
        cid = mem.conversations.create(ALICE).id
        mem.messages.append(ALICE, cid, role="user", content="a fresh start")
        assert texts(mem, ALICE, cid) == ["a fresh start"]
    finally:
        mem.close()


def test_missing_or_wrong_master_key_stops_the_open(home: Path) -> None:
    Memory.open(settings=settings(home)).close()
    with pytest.raises(KeyringError, match="MASTER_KEY_FILE is not set"):
        Memory.open(settings=settings(home, master_key_file=None))
    other = home / "other.key"
    create_master_key(other)
    with pytest.raises(KeyringError, match="does not open the keyring"):
        Memory.open(settings=settings(home, master_key_file=other))
    (home / "junk.key").write_text("not a key")
    with pytest.raises(KeyringError, match="not a memstrata master key"):
        Memory.open(settings=settings(home, master_key_file=home / "junk.key"))
    # Another keyring (an empty directory, say) would read every user as deleted: refused.
    with pytest.raises(KeyringError, match="sealed with keyring"):
        Memory.open(settings=settings(home, keyring=str(home / "elsewhere")))
    assert issubclass(KeyringError, MemstrataError)


def test_an_encrypted_store_read_without_encryption_is_an_error(home: Path) -> None:
    mem = Memory.open(settings=settings(home))
    ids = fill(mem)
    mem.close()
    plain = Memory.open(settings=Settings(home=home, worker="off"))
    try:
        with pytest.raises(KeyringError, match="holds encrypted text"):
            texts(plain, ALICE, ids["alice"])
    finally:
        plain.close()


def _move_content(mem: Memory, from_id: str, to_id: str) -> None:
    def op():  # type: ignore[no-untyped-def]
        rows = yield Query("SELECT content FROM messages WHERE id = ?", (from_id,))
        assert is_sealed(rows[0][0])
        yield Exec("UPDATE messages SET content = ? WHERE id = ?", (rows[0][0], to_id))

    mem.core.engine.run(write(op))


def test_ciphertext_moved_to_another_row_or_user_does_not_open(home: Path) -> None:
    mem = Memory.open(settings=settings(home))
    try:
        ids = fill(mem)
        a1, a2 = (m.id for m in mem.messages.list(ALICE, ids["alice"]).items)
        (b1, _) = (m.id for m in mem.messages.list(BOB, ids["bob"]).items)
        _move_content(mem, a1, a2)  # same user, another row
        with pytest.raises(Corruption, match="moved from another row"):
            texts(mem, ALICE, ids["alice"])
        _move_content(mem, a1, b1)  # another user
        with pytest.raises(Corruption):
            texts(mem, BOB, ids["bob"])
    finally:
        mem.close()


def test_master_key_rotation_keeps_every_key(home: Path) -> None:
    s = settings(home)
    mem = Memory.open(settings=s)
    ids = fill(mem)
    mem.close()
    old = (home / "master.key").read_text()
    _, n = rotate_master_key(home / "keyring", home / "master.key")
    assert n == 2
    assert (home / "master.key").read_text() != old
    mem = Memory.open(settings=s)
    try:
        assert texts(mem, BOB, ids["bob"])[0] == f"I keep {BOB_WORDS} at home"
    finally:
        mem.close()
    stale = home / "stale.key"
    stale.write_text(old)
    with pytest.raises(KeyringError):
        Memory.open(settings=settings(home, master_key_file=stale))


def test_encryption_off_by_default_writes_plain_text(home: Path) -> None:
    mem = Memory.open(settings=Settings(home=home, worker="off"))
    try:
        assert mem.core.sealer is None
        ids = fill(mem)
        rows = mem.core.engine.run(
            read(lambda: (yield Query("SELECT content FROM messages ORDER BY seq")))
        )
        assert rows[0][0] == f"I keep {ALICE_WORDS} at home"
        assert texts(mem, ALICE, ids["alice"])[1] == f"Noted: {ALICE_WORDS}."
    finally:
        mem.close()


# -- PostgreSQL --------------------------------------------------------------------------------


@pytest.fixture
def pg_schema() -> Iterator[str]:
    with postgres_schema() as schema:
        yield schema


@needs_postgres
def test_postgres_rows_and_dump_hold_no_plain_text_and_restore_forgets(
    home: Path, pg_schema: str
) -> None:
    s = settings(home)
    mem = open_pg(pg_schema, s)
    ids = fill(mem)
    assert f"I keep {ALICE_WORDS} at home" in found(mem, ALICE, "marmalopod")
    dump = home / "dump.sql"
    url = POSTGRES_URL
    subprocess.run(["pg_dump", "-n", pg_schema, "-f", str(dump), url], check=True)
    rows = pg_rows_text(pg_schema)
    for word in (ALICE_WORDS + " " + BOB_WORDS).split():
        assert word not in rows, word
        assert word not in dump.read_text(), word
    assert mem.users.delete(ALICE).receipt.key_destroyed is True
    mem.close()
    restore_pg(pg_schema, dump)
    mem = open_pg(pg_schema, s)
    try:
        assert texts(mem, ALICE, ids["alice"]) == ["", ""]
        assert mem.recall.search(ALICE, "zephyrbloom marmalopod") == []
        assert texts(mem, BOB, ids["bob"])[1] == f"Noted: {BOB_WORDS}."
        assert mem.recall.search(BOB, "tundrascope")
    finally:
        mem.close()


@needs_postgres
def test_postgres_moved_ciphertext_does_not_open(home: Path, pg_schema: str) -> None:
    mem = open_pg(pg_schema, settings(home))
    try:
        ids = fill(mem)
        a1 = mem.messages.list(ALICE, ids["alice"]).items[0].id
        b1 = mem.messages.list(BOB, ids["bob"]).items[0].id
        _move_content(mem, a1, b1)
        with pytest.raises(Corruption):
            texts(mem, BOB, ids["bob"])
    finally:
        mem.close()


# -- the command line --------------------------------------------------------------------------


def test_cli_master_key_and_doctor(home: Path) -> None:
    import json

    from typer.testing import CliRunner

    from memstrata.cli import app

    key = home / "cli.key"
    env = {
        "MEMSTRATA_HOME": str(home),
        "MEMSTRATA_DB": None,
        "MEMSTRATA_ENCRYPT_AT_REST": "true",
        "MEMSTRATA_MASTER_KEY_FILE": str(key),
        "MEMSTRATA_KEYRING": str(home / "keyring"),
    }
    runner = CliRunner()
    made = runner.invoke(app, ["master-key", "create", "--out", str(key)], env=env)
    assert made.exit_code == 0
    assert len(made.stdout.strip()) == 16
    again = runner.invoke(app, ["master-key", "create", "--out", str(key)], env=env)
    assert again.exit_code == 1
    assert "never overwritten" in again.stderr
    s = settings(home, master_key_file=key)
    mem = Memory.open(settings=s)
    fill(mem)
    mem.close()
    doctor = runner.invoke(app, ["doctor", "--json"], env=env)
    report = json.loads(doctor.stdout)["encryption"]
    assert report["ok"]
    assert report["enabled"]
    assert (report["messages"], report["sealed_messages"]) == (4, 4)
    rotated = runner.invoke(app, ["master-key", "rotate"], env=env)
    assert rotated.exit_code == 0, rotated.stderr
    assert "2 data key(s) rewrapped" in rotated.stderr
    off = runner.invoke(
        app, ["doctor", "--json"], env={**env, "MEMSTRATA_ENCRYPT_AT_REST": "false"}
    )
    assert off.exit_code == 1
    assert "sealed message(s)" in json.loads(off.stdout)["encryption"]["error"]


def test_encrypt_all_seals_an_existing_store(home: Path) -> None:
    from typer.testing import CliRunner

    from memstrata.cli import app
    from memstrata.errors import Conflict

    plain = Memory.open(settings=Settings(home=home, worker="off"))
    ids = fill(plain)
    assert f"I keep {ALICE_WORDS} at home" in found(plain, ALICE, "zephyrbloom")  # indexed
    fact = plain.facts.add(ALICE, "Alice waters the snarkleberry daily")
    plain.facts.edit(ALICE, fact.id, content="Alice waters the plumquartz daily")
    plain.close()
    s = settings(home)
    env = {
        "MEMSTRATA_HOME": str(home),
        "MEMSTRATA_DB": None,
        "MEMSTRATA_ENCRYPT_AT_REST": "true",
        "MEMSTRATA_MASTER_KEY_FILE": str(s.master_key_file),
        "MEMSTRATA_KEYRING": str(home / "keyring"),
    }
    runner = CliRunner()
    first = runner.invoke(app, ["encrypt", "--all", "--batch", "3"], env=env)
    assert first.exit_code == 0, (first.stderr, first.exception)
    assert "sealed 4 of 4 message(s)" in first.stdout
    assert "sealed 1 of 1 fact(s)" in first.stdout
    again = runner.invoke(app, ["encrypt", "--all"], env=env)  # resumable: nothing left
    assert "sealed 0 of 4 message(s)" in again.stdout
    assert "sealed 0 of 1 fact(s)" in again.stdout
    with store_file(home / "memstrata.db") as conn:
        conn.execute("VACUUM")
    raw = b"".join(p.read_bytes() for p in home.glob("memstrata.db*"))
    for word in (*ALICE_WORDS.split(), "snarkleberry", "plumquartz"):
        assert word.encode() not in raw, word
    mem = Memory.open(settings=s)
    try:
        assert texts(mem, ALICE, ids["alice"])[0] == f"I keep {ALICE_WORDS} at home"
        assert f"I keep {ALICE_WORDS} at home" in found(mem, ALICE, "zephyrbloom")
        assert [f.content for f in mem.facts.list(ALICE).items] == [
            "Alice waters the plumquartz daily"
        ]
        assert "Alice waters the snarkleberry daily" in [
            e.content for e in mem.facts.history(ALICE, fact.id)
        ]
        with pytest.raises(Conflict):  # the content key was keyed too: duplicates still meet
            mem.facts.add(ALICE, "alice waters the PLUMQUARTZ daily")
    finally:
        mem.close()


def test_facts_and_their_history_are_sealed(home: Path) -> None:
    from memstrata.errors import Conflict

    s = settings(home)
    mem = Memory.open(settings=s)
    fact = mem.facts.add(ALICE, "Alice keeps a quixotrellis in the shed")
    with pytest.raises(Conflict):  # the duplicate check still meets, on keyed hashes
        mem.facts.add(ALICE, "alice keeps a  QUIXOTRELLIS in the shed")
    mem.facts.add(BOB, "Alice keeps a quixotrellis in the shed")  # another owner: no clash
    edited = mem.facts.edit(ALICE, fact.id, content="Alice keeps a zephyrbloom in the shed")
    assert edited.content == "Alice keeps a zephyrbloom in the shed"
    assert [e.content for e in mem.facts.history(ALICE, fact.id)][-1:] == [
        "Alice keeps a quixotrellis in the shed"
    ]
    assert {f.content for f in mem.facts.list(ALICE).items} == {edited.content}
    raw = b"".join(p.read_bytes() for p in home.glob("memstrata.db*"))
    mem.users.delete(ALICE)
    mem.close()
    raw += (home / "memstrata.db").read_bytes()
    for word in ("quixotrellis", "zephyrbloom"):
        assert word.encode() not in raw, word


# -- every other text of a user ----------------------------------------------------------------

#: One word per kind of text: found anywhere in the raw store, that kind leaked.
KINDS = ("profile", "working", "plan", "snapshot", "checkpoint", "graph", "node", "summary")


def canary(user: str, kind: str) -> str:
    return f"zq{user}{kind}wv"


def fill_state(mem: Memory, scope: Scope) -> str:
    """Every kind of text besides messages and facts, each holding its canary word, written
    for ``scope``; returns its conversation id."""
    from memstrata.graph.checkpoints import GraphWrite
    from memstrata.longterm.store import set_profile

    def word(kind: str) -> str:
        return canary(scope.user, kind)

    cid = mem.conversations.create(scope).id
    rt = mem.core.rt
    mem.core.engine.run(
        write(lambda: set_profile(rt, scope, {"workContext": f"builds {word('profile')}"}))
    )
    # Rewritten, so the first text moves to the section's version rows.
    mem.core.engine.run(
        write(lambda: set_profile(rt, scope, {"workContext": f"now {word('profile')} too"}))
    )
    mem.working.put(scope, f"notes on {word('working')}", conversation_id=cid)
    mem.working.put(scope, {"about": word("working")})
    mem.plans.put(scope, cid, {"steps": [word("plan")]})
    mem.snapshots.put(scope, cid, "run1", {"ui": word("snapshot")})
    mem.checkpoints.save(scope, "task", "run1", {"said": word("checkpoint")})
    mem.graphs.put_checkpoint(
        scope,
        thread_id="t1",
        checkpoint_ns="",
        checkpoint_id="c1",
        parent_id=None,
        type="json",
        checkpoint=f'{{"v": "{word("graph")}"}}'.encode(),
        metadata_type="json",
        metadata=f'{{"m": "{word("graph")}"}}'.encode(),
    )
    mem.graphs.put_writes(
        scope,
        thread_id="t1",
        checkpoint_ns="",
        checkpoint_id="c1",
        writes=[GraphWrite("task", 0, "messages", "json", word("graph").encode())],
    )
    mem.nodes.add_turn(
        scope,
        "app",
        cid,
        "node",
        message_id="m1",
        user_content=f"ask {word('node')}",
        assistant_content=f"answer {word('node')}",
    )
    for i in range(40):  # enough for a summary of the branch
        mem.messages.append(
            scope,
            cid,
            role="user" if i % 2 == 0 else "assistant",
            content=f"turn {i} about {word('summary')} " + "and more words " * 20,
        )
    assert mem.compact(scope, cid).outcome == "compacted"
    return cid


def read_state(mem: Memory, scope: Scope, cid: str) -> dict[str, object]:
    """What ``scope`` reads back of each kind (None where it reads as absent)."""
    from memstrata.context.summaries import get_summary
    from memstrata.errors import Expired, NotFound

    def absent(call):  # type: ignore[no-untyped-def]
        try:
            return call()
        except (NotFound, Expired):
            return None

    graph = mem.graphs.get_checkpoint(scope, "t1")
    summary = absent(lambda: mem.core.engine.run(read(lambda: get_summary(scope, cid))))
    return {
        "profile": [p.summary for p in mem.longterm.profile(scope) if p.summary],
        "working": absent(lambda: mem.working.get(scope, conversation_id=cid).content),
        "user working": absent(lambda: mem.working.get(scope).content),
        "plan": absent(lambda: mem.plans.get(scope, cid).document),
        "snapshot": absent(lambda: mem.snapshots.get(scope, cid, "run1").data),
        "checkpoint": absent(lambda: mem.checkpoints.load(scope, "task", "run1").state),
        "graph": None if graph is None else (graph.checkpoint, [w.value for w in graph.writes]),
        "node": [t.content for t in mem.nodes.history(scope, "app", cid, "node").messages],
        "summary": None if summary is None else canary(scope.user, "summary") in summary.content,
    }


def held_profile(mem: Memory, scope: Scope) -> list[str]:
    """The profile as known now, through its version rows (the ``known_at`` path)."""
    from datetime import UTC, datetime

    return [p.summary for p in mem.longterm.profile(scope, known_at=datetime.now(UTC)) if p.summary]


def assert_all_readable(state: dict[str, object], user: str) -> None:
    w = {kind: canary(user, kind) for kind in KINDS}
    assert state["profile"] == [f"now {w['profile']} too"]
    assert state["working"] == f"notes on {w['working']}"
    assert state["user working"] == {"about": w["working"]}
    assert state["plan"] == {"steps": [w["plan"]]}
    assert state["snapshot"] == {"ui": w["snapshot"]}
    assert state["checkpoint"] == {"said": w["checkpoint"]}
    assert state["graph"] == (f'{{"v": "{w["graph"]}"}}'.encode(), [w["graph"].encode()])
    assert state["node"] == [f"ask {w['node']}", f"answer {w['node']}"]
    assert state["summary"] is True


NOTHING: dict[str, object] = {
    "profile": [],
    "working": None,
    "user working": None,
    "plan": None,
    "snapshot": None,
    "checkpoint": None,
    "graph": None,
    "node": [],
    "summary": None,
}


def raw_home(home: Path) -> bytes:
    """Every file of the store's home but the keyring and the master key (the database,
    its WAL, the node memory objects, backups), gzip objects also unpacked."""
    import gzip

    out = []
    for p in home.rglob("*"):
        if p.is_file() and "keyring" not in p.parts and not p.name.endswith(".key"):
            data = p.read_bytes()
            out.append(gzip.decompress(data) if data.startswith(b"\x1f\x8b") else data)
    return b"".join(out)


def node_objects(home: Path) -> list[Path]:
    return [p for p in home.rglob("*") if p.is_file() and "seg" in p.parts]


def test_every_other_text_is_sealed_and_forgotten_after_restore(home: Path) -> None:
    s = settings(home)
    mem = Memory.open(settings=s)
    alice = fill_state(mem, ALICE)
    bob = fill_state(mem, BOB)
    assert_all_readable(read_state(mem, ALICE, alice), "alice")
    # As known now: every version row of the section is opened (the earlier one too).
    assert held_profile(mem, ALICE) == [f"now {canary('alice', 'profile')} too"]
    raw = raw_home(home)
    backup = home / "backup.db"
    backup_sqlite(home / "memstrata.db", backup)
    assert all(p.read_bytes().startswith(b"\x1bms1:") for p in node_objects(home))
    shutil.copytree(home / "blobs", home / "blobs-backup")  # the node memory objects
    mem.users.delete(ALICE)
    mem.close()
    raw += raw_home(home)
    for user in ("alice", "bob"):
        for kind in KINDS:
            assert canary(user, kind).encode() not in raw, (user, kind)
    # The database and the blob store restored as they were before the delete.
    for f in home.glob("memstrata.db*"):
        f.unlink()
    shutil.copy(backup, home / "memstrata.db")
    shutil.rmtree(home / "blobs")
    shutil.copytree(home / "blobs-backup", home / "blobs")
    mem = Memory.open(settings=s)
    try:
        assert read_state(mem, ALICE, alice) == NOTHING
        assert held_profile(mem, ALICE) == []
        assert_all_readable(read_state(mem, BOB, bob), "bob")
        # Written again, each starts afresh under Alice's new key.
        assert mem.working.put(ALICE, "anew").content == "anew"
        # Create-only over a restored document that reads as absent: version 1.
        assert (
            mem.working.put(ALICE, "afresh", conversation_id=alice, expected_version=0).version == 1
        )
        assert mem.working.get(ALICE).content == "anew"
        # The restored plan reads as absent, so a create-only write makes version 1.
        plan = mem.plans.put(ALICE, alice, {"steps": []}, expected_version=0)
        assert (plan.document, plan.version) == ({"steps": []}, 1)
    finally:
        mem.close()


def test_plain_state_stays_plain_with_encryption_off(home: Path) -> None:
    mem = Memory.open(settings=Settings(home=home, worker="off"))
    try:
        cid = fill_state(mem, ALICE)
        assert_all_readable(read_state(mem, ALICE, cid), "alice")
        assert canary("alice", "node").encode() in raw_home(home)
        assert canary("alice", "profile").encode() in raw_home(home)
    finally:
        mem.close()


@needs_postgres
def test_postgres_every_other_text_is_sealed_and_forgotten_after_restore(
    home: Path, pg_schema: str
) -> None:
    s = settings(home)
    mem = open_pg(pg_schema, s)
    alice = fill_state(mem, ALICE)
    bob = fill_state(mem, BOB)
    dump = home / "dump.sql"
    subprocess.run(["pg_dump", "-n", pg_schema, "-f", str(dump), POSTGRES_URL], check=True)
    shutil.copytree(home / "blobs", home / "blobs-backup")
    rows = pg_rows_text(pg_schema) + dump.read_text()
    for user in ("alice", "bob"):
        for kind in KINDS:
            # A bytea column prints as hex: look for that form too.
            word = canary(user, kind)
            assert word not in rows, (user, kind)
            assert word.encode().hex() not in rows, (user, kind)
    assert mem.users.delete(ALICE).receipt.key_destroyed is True
    mem.close()
    restore_pg(pg_schema, dump)
    shutil.rmtree(home / "blobs")
    shutil.copytree(home / "blobs-backup", home / "blobs")
    mem = open_pg(pg_schema, s)
    try:
        assert read_state(mem, ALICE, alice) == NOTHING
        assert_all_readable(read_state(mem, BOB, bob), "bob")
    finally:
        mem.close()


@needs_postgres
def test_keyring_in_a_postgres_database_of_its_own(home: Path, pg_schema: str) -> None:
    from memstrata.keyring import describe

    # Another schema of the local server stands for the keyring's own database.
    ring = f"{POSTGRES_URL}{'&' if '?' in POSTGRES_URL else '?'}options=-csearch_path%3D{pg_schema}"
    s = settings(home, keyring=ring)
    mem = Memory.open(settings=s)
    ids = fill(mem)
    backup = home / "backup.db"
    backup_sqlite(home / "memstrata.db", backup)
    assert not (home / "keyring").exists()  # nothing of the keyring beside the store
    import psycopg

    with psycopg.connect(POSTGRES_URL) as conn:
        names = [
            r[0] for r in conn.execute(f"SELECT name FROM {pg_schema}.memstrata_keyring").fetchall()
        ]
    assert "keyring.json" in names
    assert sum(n.startswith("keys/") for n in names) == 2
    assert sum(n.startswith("owners/") for n in names) == 2
    assert mem.users.delete(ALICE).receipt.key_destroyed is True
    mem.close()
    for f in home.glob("memstrata.db*"):
        f.unlink()
    shutil.copy(backup, home / "memstrata.db")
    mem = Memory.open(settings=s)
    try:
        assert texts(mem, ALICE, ids["alice"]) == ["", ""]
        assert texts(mem, BOB, ids["bob"])[0] == f"I keep {BOB_WORDS} at home"
    finally:
        mem.close()
    # The master key is checked against the database keyring too, and rotation works there.
    other = home / "other.key"
    create_master_key(other)
    with pytest.raises(KeyringError, match="does not open the keyring"):
        Memory.open(settings=settings(home, keyring=ring, master_key_file=other))
    _, n = rotate_master_key(ring, home / "master.key")
    assert n == 1  # Bob's (Alice's was destroyed)
    mem = Memory.open(settings=s)
    try:
        assert texts(mem, BOB, ids["bob"])[1] == f"Noted: {BOB_WORDS}."
    finally:
        mem.close()
    assert describe("postgresql://u:secret@db/keys") == "postgresql://db/keys"
