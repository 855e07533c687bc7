"""PostgreSQL under faults: unreachable servers, dropped connections, racing migrations."""

from __future__ import annotations

import secrets
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from memstrata import BackendUnavailable, Memory, Scope
from memstrata.api.core import Core
from memstrata.config import Settings
from memstrata.runtime import Runtime
from memstrata.storage.plan import Exec, Op, Query, write
from memstrata.storage.schema import MIGRATIONS
from memstrata.tokens import get_tokenizer
from support import NEEDS_POSTGRES, POSTGRES_URL, postgres_available, postgres_schema

pytestmark = pytest.mark.xdist_group("postgres")
SCOPE = Scope("acme", "u1")


@pytest.fixture
def app_name() -> str:
    return f"memstrata-test-{secrets.token_hex(4)}"


@pytest.fixture
def pg(app_name: str, tmp_path: Path) -> Iterator[Memory]:
    from memstrata.backends.postgres import PostgresEngine

    with postgres_schema() as schema:
        sep = "&" if "?" in POSTGRES_URL else "?"
        engine = PostgresEngine(
            f"{POSTGRES_URL}{sep}application_name={app_name}", schema=schema, max_size=3
        )
        mem = Memory(Core(engine, Runtime(get_tokenizer()), Settings(home=tmp_path, worker="off")))
        yield mem
        mem.close()


def _kill_connections(app_name: str) -> int:
    import psycopg

    with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
        rows = conn.execute(
            "SELECT pg_terminate_backend(pid) FROM pg_stat_activity WHERE application_name = %s",
            (app_name,),
        ).fetchall()
    return len(rows)


def test_unreachable_server_names_host_and_port_never_the_password(tmp_path: Path) -> None:
    with pytest.raises(BackendUnavailable) as info:
        Memory.open(
            "postgresql://postgres:hunter2-secret@127.0.0.1:1/test",
            settings=Settings(home=tmp_path),
        )
    message = str(info.value)
    assert "127.0.0.1:1" in message
    assert "hunter2" not in message
    assert info.value.status == 503


def test_reads_survive_dropped_connections(pg: Memory, app_name: str) -> None:
    conv = pg.conversations.create(SCOPE, title="before")
    pg.messages.append(SCOPE, conv.id, role="user", content="hello")
    assert _kill_connections(app_name) >= 1
    assert pg.history(SCOPE, conv.id).messages[0].content == "hello"  # retried on a fresh one
    assert _kill_connections(app_name) >= 1
    # A write whose connection was dead before BEGIN never started: it is safe to run.
    assert pg.messages.append(SCOPE, conv.id, role="assistant", content="hi").content == "hi"


def test_a_started_write_is_never_replayed(pg: Memory) -> None:
    starts = 0

    def doomed() -> Op[None]:
        nonlocal starts
        starts += 1
        yield Exec("INSERT INTO tenants (id, created_at) VALUES ('half-written', 0)")
        yield Query("SELECT pg_terminate_backend(pg_backend_pid())")  # the link drops mid-write
        yield Exec("INSERT INTO tenants (id, created_at) VALUES ('never', 0)")

    with pytest.raises(BackendUnavailable):
        pg.core.engine.run(write(doomed))
    assert starts == 1
    rows = pg.core.engine.run(write(lambda: _tenants()))
    assert "half-written" not in rows  # rolled back with its connection
    assert "never" not in rows


def _tenants() -> Op[list[str]]:
    rows = yield Query("SELECT id FROM tenants")
    return [r[0] for r in rows]


_MIGRATE = """
import sys
from memstrata.backends.postgres import PostgresEngine
PostgresEngine(sys.argv[1], schema=sys.argv[2]).close()
"""


@pytest.mark.slow
def test_processes_migrating_at_once_apply_each_version_once() -> None:
    if not postgres_available():
        pytest.skip(NEEDS_POSTGRES)
    import psycopg

    with postgres_schema() as schema:
        procs = [
            subprocess.Popen(
                [sys.executable, "-c", _MIGRATE, POSTGRES_URL, schema],
                stderr=subprocess.PIPE,
                text=True,
            )
            for _ in range(4)
        ]
        for p in procs:
            _, err = p.communicate(timeout=120)
            assert p.returncode == 0, err
        with psycopg.connect(POSTGRES_URL, autocommit=True) as conn:
            versions = [
                r[0]
                for r in conn.execute(
                    f"SELECT version FROM {schema}.schema_migrations ORDER BY version"
                )
            ]
    assert versions == [m.version for m in MIGRATIONS["postgres"]]
