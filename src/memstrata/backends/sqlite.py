"""The embedded SQLite backend: one file in WAL mode, or a private in-memory database.

The driver is APSW, which bundles its own current SQLite (the same on every platform,
whatever the system's) and turns rows into Python values at about half the cost of the
standard library's module (``bench history``: history p50 at 10k messages 0.135 against
0.228 ms, docs/benchmarks.md "SQLite through APSW"). Every connection this process opens
to a store goes through it: two copies of SQLite in one process must not open the same
file (each drops the other's POSIX locks when it closes it).

Each thread gets its own connection (WAL lets readers run beside the writer).
Write operations take ``BEGIN IMMEDIATE`` so two writers queue on the database
lock instead of failing half-way on a lock upgrade; reads run in a deferred
transaction so they see one snapshot. The async driver runs the same operation
in a worker thread, so the event loop never waits on disk, except a read marked
``quick`` (short and bounded), which runs on the event loop's own connection.
"""

from __future__ import annotations

import contextlib
import itertools
import logging
import os
import threading
from collections.abc import Callable
from pathlib import Path
from typing import Any, TypeVar

import anyio.to_thread
import apsw
from anyio import CapacityLimiter

from memstrata.errors import BackendUnavailable, Conflict, Corruption, InvalidInput, MemstrataError
from memstrata.storage.plan import Exec, Plan, Request, drive
from memstrata.storage.schema import MIGRATIONS

__all__ = ["SqliteEngine"]

T = TypeVar("T")
log = logging.getLogger(__name__)
_memory_ids = itertools.count()

#: Prepared statements kept per connection (the store has a few hundred distinct ones; the
#: hot paths' stay prepared).
STATEMENT_CACHE = 512
# Each connection is used by one thread at a time (APSW refuses concurrent use of one), so
# SQLite's per-connection mutex only costs time on every call.
_OPEN_FLAGS = (
    apsw.SQLITE_OPEN_READWRITE
    | apsw.SQLITE_OPEN_CREATE
    | apsw.SQLITE_OPEN_URI
    | apsw.SQLITE_OPEN_NOMUTEX
)

#: Operations one engine runs at once for the async API: the cores, between 2 and 8.
READ_THREADS = max(2, min(8, os.cpu_count() or 2))


# Errors an operator can act on, by the driver's class (one per SQLite result code); the
# driver's own text stays in the log, never in an error a client sees.
_UNAVAILABLE: tuple[tuple[type[Exception], str], ...] = (
    (apsw.BusyError, "the database is locked by another writer"),
    (apsw.LockedError, "a table is locked"),
    (apsw.NoMemError, "sqlite ran out of memory"),
    (
        apsw.ReadOnlyError,
        "the database is read-only (check the permissions of the file, its -wal and -shm)",
    ),
    (apsw.IOError, "a disk I/O error occurred"),
    (apsw.FullError, "the disk holding the database is full"),
    (apsw.CantOpenError, "the database file cannot be opened"),
)


def translate(exc: Exception) -> Exception:
    """Driver errors become memstrata errors at this boundary (without the driver's text)."""
    if isinstance(exc, MemstrataError):
        return exc
    if isinstance(exc, apsw.ConstraintError):
        return Conflict("the write conflicts with a stored row")
    if isinstance(exc, apsw.TooBigError | apsw.MismatchError | OverflowError):
        return InvalidInput("a value is out of the range the database can store")
    if isinstance(exc, UnicodeEncodeError):  # a lone surrogate in a stored text
        return InvalidInput("a text value is not valid Unicode")
    if isinstance(exc, apsw.Error):
        log.warning("sqlite error %s: %s", type(exc).__name__, exc)
        if isinstance(exc, apsw.CorruptError | apsw.NotADBError) or "malformed" in str(exc):
            return Corruption("the sqlite database is damaged")
        for kind, why in _UNAVAILABLE:
            if isinstance(exc, kind):
                return BackendUnavailable(f"sqlite: {why}")
        # SQLITE_ERROR and the rest of SQLite's own codes; the driver's misuse (bindings,
        # threads, closed objects) stays the bug it is.
        if not isinstance(exc, _MISUSE):
            return BackendUnavailable("sqlite: the database cannot be used right now")
    return exc


_MISUSE = (
    apsw.BindingsError,
    apsw.ThreadingViolationError,
    apsw.ConnectionClosedError,
    apsw.CursorClosedError,
    apsw.MisuseError,
    apsw.ExecutionCompleteError,
    apsw.IncompleteExecutionError,
)


def check_store(db: Path, access: Callable[[Path, int], bool] = os.access) -> None:
    """Refuse, naming the path, a store sqlite could not use.

    WAL mode maps ``<db>-shm`` into memory: on a file the process cannot write
    (read-only, or immutable) sqlite's first touch of the mapping can kill the
    process with SIGBUS and no log line, and a read-only database fails deep in
    a migration with a driver message that names no file. So the database, its
    ``-wal`` and ``-shm`` must be readable and writable where they exist, and the
    directory writable when sqlite has to create any of them. ``access`` is the
    kernel's own answer (``os.access`` knows about immutable files, and that root
    may write a read-only one); tests pass another to play other users.
    """
    directory = db.parent
    if not access(directory, os.R_OK | os.X_OK):
        raise _unusable(directory, "the store directory cannot be read")
    files = [db, db.with_name(db.name + "-wal"), db.with_name(db.name + "-shm")]
    for f in files:
        if not f.exists():
            continue
        if not access(f, os.R_OK):
            raise _unusable(f, "the file cannot be read")
        if not access(f, os.W_OK):
            raise _unusable(f, "the file is not writable (read-only or immutable)")
    missing = [f.name for f in files if not f.exists()]
    if missing and not access(directory, os.W_OK | os.X_OK):
        raise _unusable(
            directory, f"the store directory is not writable, and sqlite must create {missing[0]}"
        )


def _unusable(path: Path, why: str) -> BackendUnavailable:
    return BackendUnavailable(f"cannot use the sqlite store at {path}: {why}", where=str(path))


def _rollback(conn: apsw.Connection) -> None:
    """Roll back without hiding the error that made us roll back: after a full disk or an
    I/O error sqlite may have rolled back already, or may fail to, and either must not
    replace the original error."""
    try:
        conn.execute("ROLLBACK")
    except apsw.Error as exc:
        log.debug("sqlite rollback failed after an error: %s", exc)


class SqliteEngine:
    """Runs :class:`~memstrata.storage.plan.Plan` objects against SQLite."""

    dialect = "sqlite"

    def __init__(
        self, path: str | Path | None, *, synchronous: str = "NORMAL", busy_timeout_ms: int = 10_000
    ) -> None:
        if path is None or str(path) == ":memory:":
            # A named in-memory database (the memdb VFS, a name starting with "/") that every
            # connection of this process opens: every thread sees the same data.
            self._target = f"file:/memstrata-mem-{os.getpid()}-{next(_memory_ids)}?vfs=memdb"
            self._uri = True
            self.location = ":memory:"
        else:
            p = Path(path)
            try:
                p.parent.mkdir(parents=True, exist_ok=True)
            except OSError as exc:
                why = f"the store directory cannot be created ({exc.strerror})"
                raise _unusable(p.parent, why) from None
            check_store(p)
            self._target = str(p)
            self._uri = False
            self.location = str(p)
        self._synchronous = synchronous
        self._busy_ms = busy_timeout_ms
        self._local = threading.local()
        self._all: list[apsw.Connection] = []
        self._all_lock = threading.Lock()
        # An in-memory database has no WAL (a writer and a reader block each other): serialise.
        self._serial = threading.RLock() if self._uri else None
        # Threads that run operations for the async API: SQLite's work here is CPU in this
        # process (pages come from the cache), so more threads than cores only take turns
        # on the GIL and cost CPU (bench serve: 8 threads on 2 cores doubled the CPU of a
        # context request and halved history's throughput against 2).
        self._limiter = CapacityLimiter(READ_THREADS)
        # SQLite runs one writer at a time: writers of this process queue on the event loop
        # instead of in threads spinning on the database lock (each woken writer costs CPU
        # and the GIL); other processes' writers still meet the busy timeout.
        self._write_limiter = CapacityLimiter(1)
        self._closed = False
        try:
            self._anchor = self._connect()  # keeps an in-memory database alive
            self.migrate()
        except (apsw.Error, MemstrataError) as exc:
            self.close()
            reason = translate(exc) if isinstance(exc, apsw.Error) else exc
            raise BackendUnavailable(
                f"cannot use the sqlite store at {self.location}: {reason}", where=self.location
            ) from None

    # -- connections ---------------------------------------------------------------------

    def _connect(self) -> apsw.Connection:
        try:
            conn = apsw.Connection(
                self._target,
                flags=_OPEN_FLAGS,
                statementcachesize=STATEMENT_CACHE,
            )
        except apsw.Error as exc:
            raise translate(exc) from None
        try:
            conn.set_busy_timeout(int(self._busy_ms))
            if not self._uri:
                conn.execute("PRAGMA journal_mode = WAL")
                conn.execute(f"PRAGMA synchronous = {self._synchronous}")
            conn.execute("PRAGMA foreign_keys = ON")
        except apsw.Error as exc:
            conn.close()
            raise translate(exc) from None
        with self._all_lock:
            self._all.append(conn)
        return conn

    def _conn(self) -> apsw.Connection:
        if self._closed:
            raise BackendUnavailable("this memory is closed")
        conn: apsw.Connection | None = getattr(self._local, "conn", None)
        if conn is None:
            conn = self._local.conn = self._connect()
        return conn

    def close(self) -> None:
        self._closed = True
        with self._all_lock:
            for conn in self._all:
                with contextlib.suppress(apsw.Error):
                    conn.close()
            self._all.clear()

    async def aclose(self) -> None:
        self.close()

    @property
    def closed(self) -> bool:
        return self._closed

    # -- running operations --------------------------------------------------------------

    @staticmethod
    def _execute(conn: apsw.Connection, request: Request) -> Any:
        if isinstance(request, Exec):
            before = conn.total_changes()
            conn.execute(request.sql, tuple(request.params))
            # The rows the statement itself changed (not its cascades); 0 when none.
            return conn.changes() if conn.total_changes() != before else 0
        return conn.execute(request.sql, tuple(request.params)).fetchall()

    def run(self, plan: Plan[T]) -> T:
        """Run one operation in one transaction on this thread's connection."""
        if self._serial is not None:
            with self._serial:
                return self._run(plan)
        return self._run(plan)

    def _run(self, plan: Plan[T]) -> T:
        conn = self._conn()
        try:
            conn.execute("BEGIN IMMEDIATE" if plan.writes else "BEGIN")
        except apsw.Error as exc:
            raise translate(exc) from None
        try:
            result = drive(plan.make(), lambda r: self._execute(conn, r), translate)
        except BaseException:
            _rollback(conn)
            raise
        try:
            conn.execute("COMMIT")
        except apsw.Error as exc:
            _rollback(conn)
            raise translate(exc) from None
        return result

    async def arun(self, plan: Plan[T]) -> T:
        if plan.quick and not plan.writes and self._serial is None:
            # A short bounded read costs less than waking a worker thread for it (bench
            # serve: the wake-up was a quarter of a REST history's CPU). WAL readers do not
            # wait on the writer, so the event loop does not wait on disk locks here.
            return self._run(plan)
        if plan.writes:
            async with self._write_limiter:
                return await anyio.to_thread.run_sync(self.run, plan, limiter=self._limiter)
        return await anyio.to_thread.run_sync(self.run, plan, limiter=self._limiter)

    # -- schema --------------------------------------------------------------------------

    def migrate(self) -> list[int]:
        """Apply pending migrations; returns the versions applied now."""
        conn = self._conn()
        conn.execute(
            "CREATE TABLE IF NOT EXISTS schema_migrations "
            "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TEXT NOT NULL)"
        )
        applied: list[int] = []
        conn.execute("BEGIN IMMEDIATE")
        try:
            done = {r[0] for r in conn.execute("SELECT version FROM schema_migrations")}
            for m in MIGRATIONS[self.dialect]:
                if m.version in done:
                    continue
                for statement in m.statements:
                    if isinstance(statement, str):
                        conn.execute(statement)
                    else:
                        drive(statement(), lambda r: self._execute(conn, r), translate)
                conn.execute(
                    "INSERT INTO schema_migrations (version, name, applied_at) "
                    "VALUES (?, ?, datetime('now'))",
                    (m.version, m.name),
                )
                applied.append(m.version)
            conn.execute("COMMIT")
        except BaseException:
            _rollback(conn)
            raise
        return applied

    def schema_version(self) -> int:
        version = self._conn().execute("SELECT max(version) FROM schema_migrations").get
        return int(version or 0)

    def integrity_check(self) -> str:
        return str(self._conn().execute("PRAGMA integrity_check").fetchall()[0][0])
