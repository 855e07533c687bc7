"""Where the test servers are, and fresh isolated stores on each backend.

PostgreSQL tests get a schema of their own (created and dropped per store), so
they run in parallel on one database. Without a server they skip with a message
naming what to start; with CI=true the conftest turns such a skip into a failure.
"""

from __future__ import annotations

import os
import secrets
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest

from memstrata import Memory
from memstrata.api.core import Core
from memstrata.config import Settings
from memstrata.runtime import Limits, Runtime
from memstrata.tokens import get_tokenizer

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


def open_memory(kind: str, tmp: Path, **settings: object) -> Iterator[Memory]:
    """Yield a fresh Memory on ``kind``: sqlite-file, sqlite-memory or postgres."""
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
            engine = PostgresEngine(POSTGRES_URL, schema=schema, max_size=4)
            rt = Runtime(
                tokenizer=get_tokenizer(s.token_encoding),
                limits=Limits(max_content_bytes=s.max_content_bytes),
            )
            mem = Memory(Core(engine, rt, s))
            yield mem
            mem.close()
    else:  # pragma: no cover
        raise ValueError(kind)
