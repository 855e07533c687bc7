"""The PostgreSQL backend: psycopg 3 with connection pools, sync and async.

Both drivers run the same sans-IO operations as SQLite (``?`` placeholders are
rewritten once per statement text). Reads run in ``REPEATABLE READ READ ONLY``
transactions so a multi-statement read sees one snapshot (a read marked ``quick`` is
tried first as one statement alone, see ``storage.plan.one_statement``); writes run in
``READ COMMITTED`` and lock their parent row first (``FOR SHARE``, or
``FOR UPDATE`` for appends and completions), which a delete takes exclusively
before it reads: no write lands under a deleted conversation or user (see
``conversation.conversations.hold_conversation`` and ``tenancy.ensure_user``). A read that fails because its connection
dropped is retried once on a fresh connection. A write is retried only when its
connection was found dead before BEGIN (nothing reached the server); once it has
started it never is, since it may have committed: the client retries it safely
with the same message id.

An outage is answered in seconds, not minutes: a request waits at most ``wait_s`` (the
setting ``MEMSTRATA_POSTGRES_WAIT_S``, default 5) for a pooled connection, each
connection attempt gives up after libpq's shortest timeout, and after a connection
failure a circuit breaker (:mod:`memstrata.backends.breaker`) fails requests at once,
letting one probe through every quarter second; the probe that connects again starts
fresh pools (the old ones may be far into their reconnect backoff).
"""

from __future__ import annotations

import asyncio
import contextlib
import hashlib
import logging
import secrets
import threading
import time
import zlib
from functools import lru_cache
from typing import Any, TypeVar
from urllib.parse import urlsplit

from memstrata.backends.breaker import Breaker
from memstrata.errors import (
    BackendUnavailable,
    Conflict,
    InvalidInput,
    MemstrataError,
    MissingDependency,
)
from memstrata.storage.plan import (
    Exec,
    Plan,
    Query,
    Request,
    adrive,
    aone_statement,
    drive,
    one_statement,
)
from memstrata.storage.schema import MIGRATIONS

try:
    import psycopg
    from psycopg import errors as pg_errors
    from psycopg_pool import AsyncConnectionPool, ConnectionPool, PoolTimeout
except ImportError as exc:  # pragma: no cover - exercised only without the extra
    raise MissingDependency(
        'PostgreSQL needs the postgres extra: pip install "memstrata[postgres]"'
    ) from exc

__all__ = ["PostgresEngine", "PostgresLock"]

T = TypeVar("T")
log = logging.getLogger(__name__)

_BEGIN_READ = "BEGIN ISOLATION LEVEL REPEATABLE READ READ ONLY"
_BEGIN_WRITE = "BEGIN"
# SQLSTATEs (full, or their class) an operator can act on.
_UNAVAILABLE = {
    "53100": "out of disk space",
    "53": "out of resources",
    "57": "shutting down or restarting",
    "08": "unreachable (the connection failed)",
    "40": "busy: a concurrent transaction got in the way, retry",
}
# libpq's shortest connect timeout (smaller values count as 2 s): a pool's connection
# attempt or a probe never hangs longer on an unreachable host.
_CONNECT_TIMEOUT_S = 2
_LOCKS = {"skip_locked": " FOR UPDATE SKIP LOCKED", "share": " FOR SHARE", "update": " FOR UPDATE"}


class _NotStarted(Exception):
    """The connection failed before BEGIN: nothing of the operation reached the server."""

    def __init__(self, cause: psycopg.OperationalError) -> None:
        super().__init__(str(cause))
        self.cause = cause


@lru_cache(maxsize=2048)
def to_pyformat(sql: str) -> str:
    """``?`` placeholders become psycopg's ``%s``; a literal ``%`` is escaped."""
    return sql.replace("%", "%%").replace("?", "%s")


class PostgresEngine:
    """Runs :class:`~memstrata.storage.plan.Plan` objects against PostgreSQL."""

    dialect = "postgres"

    def __init__(
        self,
        url: str,
        *,
        min_size: int = 1,
        max_size: int = 10,
        schema: str | None = None,
        wait_s: float = 5.0,
    ) -> None:
        parts = urlsplit(url)
        self._where = f"{parts.hostname or 'localhost'}:{parts.port or 5432}"
        self.location = f"postgresql://{self._where}{parts.path}"
        self._conninfo = url
        self._kwargs: dict[str, Any] = {"autocommit": True}
        if schema is not None:
            self._kwargs["options"] = f"-c search_path={schema}"
        self._min, self._max = min_size, max_size
        self._wait_s = wait_s
        self._pool_kwargs = {**self._kwargs, "connect_timeout": _CONNECT_TIMEOUT_S}
        self._breaker = Breaker()
        self._generation = 0  # bumped when the breaker closes: pools made before are stale
        self._pool = self._new_pool()
        self._apools: dict[asyncio.AbstractEventLoop, tuple[int, AsyncConnectionPool]] = {}
        self._alock = threading.Lock()
        self._closing: set[asyncio.Task[None]] = set()
        try:
            # One direct connection first: its error says why (refused, auth, no such
            # database) where a pool would only report a timeout.
            psycopg.connect(url, connect_timeout=5, **self._kwargs).close()
            self._pool.open(wait=True, timeout=10)
        except Exception as exc:
            self._pool.close()
            raise self._unavailable(exc, startup=True) from None
        self.migrate()

    def _new_pool(self) -> ConnectionPool:
        return ConnectionPool(
            self._conninfo,
            min_size=self._min,
            max_size=self._max,
            kwargs=self._pool_kwargs,
            open=False,
            name="memstrata",
            timeout=self._wait_s,
        )

    # -- outages -------------------------------------------------------------------------

    def _failed_fast(self) -> BackendUnavailable:
        return BackendUnavailable(
            f"PostgreSQL at {self._where} is unreachable (the connection failed moments ago)",
            where=self._where,
        )

    def _reconnected(self) -> None:
        """A connection worked: when the breaker was open, start fresh pools."""
        if not self._breaker.succeeded():
            return
        log.warning("PostgreSQL at %s is reachable again", self._where)
        with self._alock:
            old = self._pool
            self._pool = self._new_pool()
            self._pool.open(wait=False)
            self._generation += 1
        # Closing waits for its workers: not on the caller's time.
        threading.Thread(target=old.close, kwargs={"timeout": 1.0}, daemon=True).start()

    def _admit(self) -> None:
        """Fail at once while the breaker is open, unless this call is the probe."""
        state = self._breaker.admit()
        if state == "closed":
            return
        if state == "open":
            raise self._failed_fast()
        self._probe()

    def _probe(self) -> None:
        """Connect directly: BackendUnavailable (the breaker open) when that fails."""
        try:
            psycopg.connect(self._conninfo, **self._pool_kwargs).close()
        except psycopg.Error as exc:
            self._breaker.failed()
            raise self._unavailable(exc) from None
        self._reconnected()

    async def _aadmit(self) -> None:
        state = self._breaker.admit()
        if state == "closed":
            return
        if state == "open":
            raise self._failed_fast()
        await self._aprobe()

    async def _aprobe(self) -> None:
        try:
            conn = await psycopg.AsyncConnection.connect(self._conninfo, **self._pool_kwargs)
            await conn.close()
        except psycopg.Error as exc:
            self._breaker.failed()
            raise self._unavailable(exc) from None
        self._reconnected()

    def ping(self) -> None:
        """Readiness: connect directly (never waiting on the pool) within libpq's shortest
        timeout and ask for one row; BackendUnavailable when that fails."""
        try:
            with psycopg.connect(self._conninfo, **self._pool_kwargs) as conn:
                conn.execute("SELECT 1")
        except psycopg.Error as exc:
            self._breaker.failed()
            raise self._unavailable(exc) from None
        self._reconnected()

    # -- errors --------------------------------------------------------------------------

    def _unavailable(self, exc: BaseException, *, startup: bool = False) -> BackendUnavailable:
        # At start-up the driver's first line says why (refused, auth, no such database;
        # psycopg names host and port, never the password); on a request the client gets
        # a fixed text and the driver's goes to the log.
        text = str(exc).strip()
        first = text.splitlines()[0] if text else type(exc).__name__
        if startup:
            return BackendUnavailable(
                f"PostgreSQL at {self._where} is unavailable: {first}", where=self._where
            )
        log.warning("PostgreSQL at %s: %s", self._where, first)
        sqlstate = getattr(exc, "sqlstate", None) or ""
        why = _UNAVAILABLE.get(sqlstate[:5]) or _UNAVAILABLE.get(sqlstate[:2], "unavailable")
        return BackendUnavailable(f"PostgreSQL at {self._where} is {why}", where=self._where)

    def translate(self, exc: Exception) -> Exception:
        """Driver errors become memstrata errors, without the driver's text."""
        if isinstance(exc, MemstrataError):
            return exc
        if isinstance(exc, psycopg.IntegrityError):
            return Conflict("the write conflicts with a stored row")
        if isinstance(exc, psycopg.DataError):
            return InvalidInput("a value cannot be stored (out of range, or not valid text)")
        if isinstance(exc, UnicodeEncodeError):  # a lone surrogate in a stored text
            return InvalidInput("a text value is not valid Unicode")
        if isinstance(exc, psycopg.OperationalError | pg_errors.AdminShutdown):
            # No connection within the wait: an outage. A connection that dropped is not
            # one by itself; the next call's probe tells (see run()).
            if isinstance(exc, PoolTimeout):
                self._breaker.failed()
            return self._unavailable(exc)
        return exc

    # -- running operations --------------------------------------------------------------

    @staticmethod
    def _sql(request: Request) -> str:
        if isinstance(request, Query) and request.lock is not None:
            return to_pyformat(request.sql + _LOCKS[request.lock])
        return to_pyformat(request.sql)

    def _execute(self, cur: psycopg.Cursor[Any], request: Request) -> Any:
        cur.execute(self._sql(request), tuple(request.params))
        if isinstance(request, Exec):
            return cur.rowcount
        return cur.fetchall()

    def _run_once(self, plan: Plan[T]) -> T:
        with self._pool.connection() as conn, conn.cursor() as cur:
            if plan.quick and not plan.writes:
                single = one_statement(plan, lambda r: self._execute(cur, r), self.translate)
                if single[0]:
                    return single[1]
            try:
                cur.execute(_BEGIN_WRITE if plan.writes else _BEGIN_READ)
            except psycopg.OperationalError as exc:
                raise _NotStarted(exc) from exc
            try:
                result = drive(plan.make(), lambda r: self._execute(cur, r), self.translate)
            except BaseException:
                if not conn.broken:
                    with contextlib.suppress(psycopg.Error):
                        cur.execute("ROLLBACK")
                raise
            cur.execute("COMMIT")
            return result

    def run(self, plan: Plan[T]) -> T:
        """Run ``plan`` in one transaction; see the module docstring for the retry rule."""
        self._admit()
        try:
            return self._run_once(plan)
        except PoolTimeout as exc:  # waited long enough: no second wait
            raise self.translate(exc) from None
        except _NotStarted:
            pass  # the connection was dead before BEGIN: nothing ran, any plan may retry
        except (BackendUnavailable, psycopg.OperationalError) as exc:
            if plan.writes:  # it may have committed: never replay a write blindly
                raise self.translate(exc) from None
        except psycopg.Error as exc:
            raise self.translate(exc) from None
        # The connection was dead: is the database reachable at all? If not, say so now
        # rather than wait for the pool (and open the breaker for the next callers).
        self._probe()
        self._pool.check()  # drop the other dead connections before the one retry
        try:
            return self._run_once(plan)
        except _NotStarted as exc:
            raise self.translate(exc.cause) from None
        except psycopg.Error as exc:
            raise self.translate(exc) from None

    async def _apool(self) -> AsyncConnectionPool:
        loop = asyncio.get_running_loop()
        generation = self._generation
        made = self._apools.get(loop)
        if made is not None and made[0] == generation:
            return made[1]
        pool = AsyncConnectionPool(
            self._conninfo,
            min_size=self._min,
            max_size=self._max,
            kwargs=self._pool_kwargs,
            open=False,
            timeout=self._wait_s,
        )
        try:
            await pool.open(wait=True, timeout=self._wait_s)
        except Exception as exc:
            await pool.close()
            raise self.translate(exc) from None
        with self._alock:
            self._apools[loop] = (generation, pool)
        if made is not None:  # made before the database came back: close it aside
            task = asyncio.get_running_loop().create_task(made[1].close(timeout=1.0))
            self._closing.add(task)
            task.add_done_callback(self._closing.discard)
        return pool

    async def _arun_once(self, plan: Plan[T]) -> T:
        pool = await self._apool()
        async with pool.connection() as conn, conn.cursor() as cur:

            async def execute(request: Request) -> Any:
                await cur.execute(self._sql(request), tuple(request.params))
                return cur.rowcount if isinstance(request, Exec) else await cur.fetchall()

            if plan.quick and not plan.writes:
                single = await aone_statement(plan, execute, self.translate)
                if single[0]:
                    return single[1]
            try:
                await cur.execute(_BEGIN_WRITE if plan.writes else _BEGIN_READ)
            except psycopg.OperationalError as exc:
                raise _NotStarted(exc) from exc

            try:
                result = await adrive(plan.make(), execute, self.translate)
            except BaseException:
                if not conn.broken:
                    with contextlib.suppress(psycopg.Error):
                        await cur.execute("ROLLBACK")
                raise
            await cur.execute("COMMIT")
            return result

    async def arun(self, plan: Plan[T]) -> T:
        await self._aadmit()
        try:
            return await self._arun_once(plan)
        except PoolTimeout as exc:
            raise self.translate(exc) from None
        except _NotStarted:
            pass
        except (BackendUnavailable, psycopg.OperationalError) as exc:
            if plan.writes:
                raise self.translate(exc) from None
        except psycopg.Error as exc:
            raise self.translate(exc) from None
        await self._aprobe()
        await (await self._apool()).check()
        try:
            return await self._arun_once(plan)
        except _NotStarted as exc:
            raise self.translate(exc.cause) from None
        except psycopg.Error as exc:
            raise self.translate(exc) from None

    # -- schema --------------------------------------------------------------------------

    def migrate(self) -> list[int]:
        """Apply pending migrations under an advisory lock, so concurrent starters queue."""
        applied: list[int] = []
        try:
            with self._pool.connection() as conn, conn.cursor() as cur:
                cur.execute("BEGIN")
                cur.execute("SELECT current_schema()")
                row = cur.fetchone()
                schema = str(row[0]) if row else "public"
                cur.execute(
                    "SELECT pg_advisory_xact_lock(%s)",
                    (zlib.crc32(f"memstrata:{schema}".encode()),),
                )
                cur.execute(
                    "CREATE TABLE IF NOT EXISTS schema_migrations "
                    "(version INTEGER PRIMARY KEY, name TEXT NOT NULL, applied_at TIMESTAMPTZ NOT NULL)"
                )
                cur.execute("SELECT version FROM schema_migrations")
                done = {r[0] for r in cur.fetchall()}
                for m in MIGRATIONS[self.dialect]:
                    if m.version in done:
                        continue
                    for statement in m.statements:
                        if isinstance(statement, str):
                            cur.execute(statement)
                        else:
                            drive(statement(), lambda r: self._execute(cur, r), self.translate)
                    cur.execute(
                        "INSERT INTO schema_migrations (version, name, applied_at) VALUES (%s, %s, now())",
                        (m.version, m.name),
                    )
                    applied.append(m.version)
                cur.execute("COMMIT")
        except psycopg.Error as exc:
            raise self.translate(exc) from None
        return applied

    def schema_version(self) -> int:
        with self._pool.connection() as conn:
            row = conn.execute("SELECT max(version) FROM schema_migrations").fetchone()
        return int(row[0] or 0) if row else 0

    @property
    def closed(self) -> bool:
        return bool(self._pool.closed)

    def close(self) -> None:
        """Close the sync pool, and the async pools whose loops are not running."""
        self._pool.close(timeout=1.0)
        for loop, (_, pool) in list(self._apools.items()):
            if not loop.is_closed() and not loop.is_running():
                loop.run_until_complete(pool.close(timeout=1.0))
                del self._apools[loop]

    async def aclose(self) -> None:
        made = self._apools.pop(asyncio.get_running_loop(), None)
        if made is not None:
            await made[1].close(timeout=1.0)
        self.close()


class PostgresLock:
    """Session advisory locks, each held on a connection of its own.

    The server frees the lock when that connection ends, so a crashed holder can
    never wedge a name (``ttl_s`` is not needed for that).
    """

    def __init__(self, engine: PostgresEngine) -> None:
        self._engine = engine
        self._held: dict[str, psycopg.Connection[Any]] = {}
        self._mutex = threading.Lock()

    @staticmethod
    def _key(name: str) -> int:
        digest = hashlib.sha256(f"memstrata-lock:{name}".encode()).digest()
        return int.from_bytes(digest[:8], "big", signed=True)

    def acquire(self, name: str, *, ttl_s: float, wait_s: float) -> str | None:
        deadline = time.monotonic() + wait_s
        try:
            conn = psycopg.connect(
                self._engine._conninfo, connect_timeout=5, **self._engine._kwargs
            )
        except psycopg.Error as exc:
            raise self._engine.translate(exc) from None
        pause = 0.002
        try:
            while True:
                row = conn.execute("SELECT pg_try_advisory_lock(%s)", (self._key(name),)).fetchone()
                if row and row[0]:
                    token = secrets.token_hex(16)
                    with self._mutex:
                        self._held[token] = conn
                    return token
                if time.monotonic() >= deadline:
                    conn.close()
                    return None
                time.sleep(pause)
                pause = min(pause * 2, 0.05)
        except psycopg.Error as exc:
            conn.close()
            raise self._engine.translate(exc) from None

    def release(self, name: str, token: str) -> bool:
        with self._mutex:
            conn = self._held.pop(token, None)
        if conn is None:
            return False
        try:
            row = conn.execute("SELECT pg_advisory_unlock(%s)", (self._key(name),)).fetchone()
            return bool(row and row[0])
        except psycopg.Error:
            return False  # the connection died, and the lock with it
        finally:
            conn.close()
