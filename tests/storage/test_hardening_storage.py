"""Issue 21, the storage findings (each test is named after its finding; finding 2,
deletes racing writes, lives in test_delete_races.py).

5: disk errors are 503, and a failing rollback never hides the real error.
6: concurrent unconditional PUTs of a plan or working memory all succeed.
7: of parallel completions of one pending message exactly one wins.
17: a cursor we did not issue is InvalidInput, whatever it holds.
18: one NUL rule on every backend.
19: a store sqlite cannot use is refused at start-up, naming the path.
Also: driver messages never reach an error a client sees.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import signal
import subprocess
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import apsw
import pytest
from typer.testing import CliRunner

from memstrata import Memory, Scope
from memstrata.backends.sqlite import SqliteEngine, check_store
from memstrata.backends.sqlite import translate as sqlite_translate
from memstrata.cli import app as cli_app
from memstrata.errors import (
    BackendUnavailable,
    Conflict,
    InvalidInput,
    MemstrataError,
    PreconditionFailed,
)
from memstrata.storage.plan import Exec, Op, write
from memstrata.storage.sql import encode_cursor
from support import open_memory

SCOPE = Scope("hard", "ann")
PARALLEL = 20


@pytest.fixture(params=["sqlite-file", "sqlite-memory", "postgres"])
def mem(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    yield from open_memory(request.param, tmp_path, pool=16)


@pytest.fixture
def file_mem(tmp_path: Path) -> Iterator[Memory]:
    yield from open_memory("sqlite-file", tmp_path)


def _parallel(calls: list[Callable[[], Any]]) -> list[Any]:
    """Run the calls at once; each result, or the MemstrataError it raised."""

    def attempt(fn: Callable[[], Any]) -> Any:
        try:
            return fn()
        except MemstrataError as exc:
            return exc

    with ThreadPoolExecutor(len(calls)) as pool:
        return list(pool.map(attempt, calls))


# -- 5: disk errors --------------------------------------------------------------------------


def test_finding5_disk_full_answers_unavailable(file_mem: Memory) -> None:
    conv = file_mem.conversations.create(SCOPE)
    conn = file_mem.core.engine._conn()  # type: ignore[attr-defined]  # this thread's
    pages = conn.execute("PRAGMA page_count").fetchone()[0]
    conn.execute(f"PRAGMA max_page_count = {pages}")  # SQLITE_FULL on the next new page
    try:
        with pytest.raises(BackendUnavailable) as err:
            file_mem.messages.append(SCOPE, conv.id, role="user", content="x" * 300_000)
        assert err.value.status == 503
        assert err.value.message == "sqlite: the disk holding the database is full"
    finally:
        conn.execute("PRAGMA max_page_count = 1073741823")
    # Nothing half-written, and the connection is usable again (no transaction left open).
    assert file_mem.conversations.get(SCOPE, conv.id).message_count == 0
    file_mem.messages.append(SCOPE, conv.id, role="user", content="after")


def test_finding5_read_only_database_answers_unavailable(file_mem: Memory) -> None:
    conv = file_mem.conversations.create(SCOPE)
    conn = file_mem.core.engine._conn()  # type: ignore[attr-defined]
    conn.execute("PRAGMA query_only = 1")  # every write now fails with SQLITE_READONLY
    try:
        with pytest.raises(BackendUnavailable) as err:
            file_mem.messages.append(SCOPE, conv.id, role="user", content="hello")
        assert "read-only" in err.value.message
    finally:
        conn.execute("PRAGMA query_only = 0")


def test_finding5_failing_rollback_does_not_hide_the_error(file_mem: Memory) -> None:
    """sqlite may end the transaction itself on a disk error; the ROLLBACK that follows
    then fails, and must not replace the error that made us roll back."""

    def op() -> Op[None]:
        yield Exec("ROLLBACK")  # as sqlite does after an I/O error
        raise Conflict("the real error")

    with pytest.raises(Conflict, match="the real error"):
        file_mem.core.engine.run(write(op))
    file_mem.conversations.create(SCOPE)  # and the connection still works


def test_driver_text_never_reaches_the_error() -> None:
    secret = "DRIVER-TEXT-with-a-path-/srv/x"
    for exc in (
        apsw.IOError(f"disk I/O error {secret}"),
        apsw.SQLError(f"no such table: {secret}"),
        apsw.ConstraintError(f"UNIQUE constraint failed: {secret}"),
        apsw.CorruptError(f"database disk image is malformed {secret}"),
        OverflowError(f"Python int too large to convert to SQLite INTEGER {secret}"),
    ):
        out = sqlite_translate(exc)
        assert isinstance(out, MemstrataError), exc
        assert secret not in out.message
        assert "Python int" not in out.message


@pytest.fixture
def pg_mem(tmp_path: Path) -> Iterator[Memory]:
    yield from open_memory("postgres", tmp_path)


def test_driver_text_never_reaches_the_error_postgres(pg_mem: Memory) -> None:
    from psycopg import errors as pg

    secret = "DRIVER-TEXT-detail"
    engine: Any = pg_mem.core.engine
    cases = {
        pg.DiskFull: BackendUnavailable,
        pg.AdminShutdown: BackendUnavailable,
        pg.DeadlockDetected: BackendUnavailable,
        pg.UniqueViolation: Conflict,
        pg.ForeignKeyViolation: Conflict,
        pg.NumericValueOutOfRange: InvalidInput,
    }
    for driver, ours in cases.items():
        out = engine.translate(driver(f"something failed: {secret}"))
        assert isinstance(out, ours), driver
        assert secret not in out.message
        assert secret not in str(out.detail)
    assert "disk" in engine.translate(pg.DiskFull("x")).message


# -- 6: concurrent unconditional PUTs --------------------------------------------------------


def test_finding6_concurrent_unconditional_plan_puts_all_succeed(mem: Memory) -> None:
    conv = mem.conversations.create(SCOPE)
    docs = [{"step": i} for i in range(PARALLEL)]
    results = _parallel([partial(mem.plans.put, SCOPE, conv.id, d) for d in docs])
    assert not [r for r in results if isinstance(r, Exception)]
    assert sorted(r.version for r in results) == list(range(1, PARALLEL + 1))
    final = mem.plans.get(SCOPE, conv.id)
    assert final.version == PARALLEL
    assert final.document == next(r.document for r in results if r.version == PARALLEL)


@pytest.mark.parametrize("where", ["user", "conversation"])
def test_finding6_concurrent_unconditional_working_memory_puts_all_succeed(
    mem: Memory, where: str
) -> None:
    cid = mem.conversations.create(SCOPE).id if where == "conversation" else None
    texts = [f"note {i}" for i in range(PARALLEL)]
    results = _parallel([partial(mem.working.put, SCOPE, t, conversation_id=cid) for t in texts])
    assert not [r for r in results if isinstance(r, Exception)]
    assert sorted(r.version for r in results) == list(range(1, PARALLEL + 1))
    final = mem.working.get(SCOPE, conversation_id=cid)
    assert final.version == PARALLEL
    assert final.content == next(r.content for r in results if r.version == PARALLEL)


def test_finding6_conditional_puts_still_refuse_a_stale_version(mem: Memory) -> None:
    conv = mem.conversations.create(SCOPE)
    mem.plans.put(SCOPE, conv.id, {"v": 1}, expected_version=0)
    with pytest.raises(PreconditionFailed):
        mem.plans.put(SCOPE, conv.id, {"v": 2}, expected_version=0)
    results = _parallel(
        [
            partial(mem.plans.put, SCOPE, conv.id, {"v": i}, expected_version=1)
            for i in range(PARALLEL)
        ]
    )
    assert sum(not isinstance(r, Exception) for r in results) == 1
    assert all(isinstance(r, PreconditionFailed) for r in results if isinstance(r, Exception))
    mem.working.put(SCOPE, "a", expected_version=0)
    with pytest.raises(PreconditionFailed):
        mem.working.put(SCOPE, "b", expected_version=0)


# -- 7: one completion wins ------------------------------------------------------------------


def test_finding7_exactly_one_parallel_completion_wins(mem: Memory) -> None:
    conv = mem.conversations.create(SCOPE)
    mem.messages.append(SCOPE, conv.id, role="user", content="question")
    pending = mem.messages.append(SCOPE, conv.id, role="assistant", content="", status="pending")
    results = _parallel(
        [
            partial(mem.messages.complete, SCOPE, conv.id, pending.id, content=f"answer {i}")
            for i in range(PARALLEL)
        ]
    )
    won = [r for r in results if not isinstance(r, Exception)]
    assert len(won) == 1
    assert all(isinstance(r, Conflict) for r in results if isinstance(r, Exception))
    stored = mem.messages.get(SCOPE, conv.id, pending.id)
    assert stored.content == won[0].content
    assert stored.status.value == "complete"


# -- 17: cursors -----------------------------------------------------------------------------

BAD_CURSORS = [
    encode_cursor("9" * 40),  # over any 64-bit column
    encode_cursor(str(2**63)),
    encode_cursor("²"),  # a digit to str.isdigit, not to int()
    encode_cursor("-1"),
    "not base64!",
]


def test_finding17_cursors_we_did_not_issue_are_invalid_input(mem: Memory) -> None:
    conv = mem.conversations.create(SCOPE)
    lists: list[Callable[[str], Any]] = [
        lambda c: mem.conversations.list(SCOPE, cursor=c),
        lambda c: mem.messages.list(SCOPE, conv.id, cursor=c),
        lambda c: mem.messages.leaves(SCOPE, conv.id, cursor=c),
        lambda c: mem.iterations.list(SCOPE, conv.id, cursor=c),
        lambda c: mem.facts.list(SCOPE, cursor=c),
    ]
    for listing in lists:
        for cursor in BAD_CURSORS:
            with pytest.raises(InvalidInput) as err:
                listing(cursor)
            assert err.value.message == "cursor is not one this server issued"
    with pytest.raises(InvalidInput):
        mem.users.list("hard", cursor=encode_cursor("a\x00b"))
    # The largest cursor that fits still works.
    assert mem.conversations.list(SCOPE, cursor=encode_cursor(2**63 - 1)).items


# -- 18: one NUL rule ------------------------------------------------------------------------


def test_finding18_nul_is_refused_in_every_text_field(mem: Memory) -> None:
    conv = mem.conversations.create(SCOPE)
    refused: list[Callable[[], Any]] = [
        lambda: mem.facts.add(SCOPE, "likes \x00 tea"),
        lambda: mem.facts.add(SCOPE, "likes tea", source_error="bad \x00"),
        lambda: mem.conversations.create(SCOPE, title="a\x00b"),
        lambda: mem.conversations.update(SCOPE, conv.id, title="a\x00b"),
        lambda: mem.messages.append(SCOPE, conv.id, role="user", content="a\x00b"),
        lambda: mem.working.put(SCOPE, "notes \x00"),
        lambda: mem.iterations.append(SCOPE, conv.id, "t", outcome="failed", error="e\x00"),
        lambda: mem.iterations.append(SCOPE, conv.id, "t\x00", outcome="failed"),
        lambda: mem.checkpoints.save(SCOPE, "g\x00", "r", {}),
        lambda: mem.snapshots.put(SCOPE, conv.id, "r\x00", {}),
    ]
    for call in refused:
        with pytest.raises(InvalidInput, match="NUL"):
            call()
    assert mem.facts.list(SCOPE).items == []
    assert mem.conversations.get(SCOPE, conv.id).message_count == 0


def test_finding18_nul_inside_json_documents_round_trips(mem: Memory) -> None:
    """JSON text escapes a NUL (``\\u0000``), so every backend stores and returns it alike."""
    conv = mem.conversations.create(SCOPE, metadata={"k\x00": "v\x00"})
    assert mem.conversations.get(SCOPE, conv.id).metadata == {"k\x00": "v\x00"}
    assert mem.working.put(SCOPE, {"a": "x\x00y"}).content == {"a": "x\x00y"}
    assert mem.plans.put(SCOPE, conv.id, ["\x00"]).document == ["\x00"]


# -- 19: a store sqlite cannot use -----------------------------------------------------------


def _denies(*paths: Path, mode: int = os.W_OK) -> Callable[[Path, int], bool]:
    """An ``access`` that answers as the kernel would for another user (or an immutable
    file): ``mode`` bits are refused on ``paths``."""
    denied = {str(p) for p in paths}

    def access(path: Path, want: int) -> bool:
        return not (str(path) in denied and want & mode)

    return access


def test_finding19_check_store_names_the_path(tmp_path: Path) -> None:
    db = tmp_path / "store" / "memstrata.db"
    db.parent.mkdir()
    with pytest.raises(BackendUnavailable, match=str(db.parent)) as err:
        check_store(db, _denies(db.parent))  # read-only directory, no database yet
    assert "memstrata.db" in err.value.message
    with pytest.raises(BackendUnavailable, match=str(db.parent)):
        check_store(db, _denies(db.parent, mode=os.R_OK))
    for name in ("memstrata.db", "memstrata.db-wal", "memstrata.db-shm"):
        path = db.parent / name
        path.touch()
        with pytest.raises(BackendUnavailable, match=f"{path}: the file is not writable"):
            check_store(db, _denies(path))
        with pytest.raises(BackendUnavailable, match=f"{path}: the file cannot be read"):
            check_store(db, _denies(path, mode=os.R_OK))
    check_store(db, _denies(db.parent))  # all three exist and are writable: fine
    check_store(db)


@contextlib.contextmanager
def _immutable(path: Path) -> Iterator[None]:
    """``chattr +i``: not even root may write it (what killed the server with SIGBUS)."""
    if shutil.which("chattr") is None:
        pytest.skip("chattr is not installed")
    made = subprocess.run(["chattr", "+i", str(path)], capture_output=True)
    if made.returncode != 0:
        pytest.skip(f"cannot make a file immutable here: {made.stderr.decode().strip()}")
    try:
        yield
    finally:
        subprocess.run(["chattr", "-i", str(path)], check=True)


def test_finding19_immutable_shm_is_refused_naming_it(tmp_path: Path) -> None:
    db = tmp_path / "memstrata.db"
    first = SqliteEngine(db)  # keeps -wal and -shm in place while open
    shm = tmp_path / "memstrata.db-shm"
    assert shm.exists()
    try:
        with _immutable(shm), pytest.raises(BackendUnavailable) as err:
            SqliteEngine(db)
        assert str(shm) in err.value.message
        assert "not writable" in err.value.message
    finally:
        first.close()


@pytest.mark.parametrize("what", ["directory", "database"])
def test_finding19_read_only_store_is_refused_naming_it(tmp_path: Path, what: str) -> None:
    store = tmp_path / "store"
    store.mkdir()
    db = store / "memstrata.db"
    if what == "database":
        SqliteEngine(db).close()
    target = store if what == "directory" else db
    with _immutable(target), pytest.raises(BackendUnavailable) as err:
        SqliteEngine(db)
    assert str(target) in err.value.message


def test_finding19_cli_says_which_path_in_one_line(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    with _immutable(home):
        result = CliRunner().invoke(
            cli_app, ["keys", "list"], env={"MEMSTRATA_HOME": str(home), "MEMSTRATA_DB": None}
        )
    assert result.exit_code == 1
    assert result.stderr.count("\n") == 1
    assert str(home) in result.stderr
    assert "Traceback" not in result.stderr


@pytest.mark.server
def test_f19_an_shm_made_immutable_while_serving_stops_the_server_cleanly_naming_it(
    tmp_path: Path,
) -> None:
    """Issue 28: the start-up check does not cover a file made immutable later; a watch
    does. The server logs one line naming ``-shm`` and exits as on SIGTERM (no SIGBUS)."""
    from support import SERVER_WAIT_SECONDS, memstrata_serve, server_env

    db = tmp_path / "served.db"
    log = tmp_path / "serve.log"
    env = server_env(home=str(tmp_path), serve_store_check_s="0.2", log_format="text")
    with memstrata_serve(f"sqlite:///{db}", env, log, SERVER_WAIT_SECONDS) as (proc, _):
        shm = tmp_path / "served.db-shm"
        assert shm.exists()
        with _immutable(shm):
            code = proc.wait(timeout=SERVER_WAIT_SECONDS)
    text = log.read_text()
    assert code in (0, -signal.SIGTERM), text  # uvicorn re-raises the SIGTERM it handled
    assert f"stopping: cannot use the sqlite store at {shm}: the file is not writable" in text
    assert "Bus error" not in text
