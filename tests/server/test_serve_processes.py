"""``memstrata serve --processes N``: several server processes on one port and one store.

Requests from concurrent clients, each on a new connection, are answered by both
processes, and what they write together is whole: every append once, each conversation
one chain in its client's order. A store that lives in one process's memory is refused.
"""

from __future__ import annotations

import os
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest
from typer.testing import CliRunner

from memstrata import Memory, Scope
from memstrata.cli import app
from memstrata.config import Settings
from support import memstrata_serve, postgres_schema, postgres_url_for, server_env

pytestmark = [pytest.mark.server, pytest.mark.slow]

PROCESSES = 2
CLIENTS = 6
PER_CLIENT = 30
WAIT_SECONDS = 90  # start-up of three interpreters on a loaded CI machine, not an expectation
ALICE = Scope("acme", "alice")


@pytest.fixture(
    params=[
        pytest.param("sqlite-file", marks=pytest.mark.xdist_group("sqlite-file")),
        pytest.param("postgres", marks=pytest.mark.xdist_group("postgres")),
    ]
)
def url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite-file":
        yield f"sqlite:///{(tmp_path / 'memstrata.db').as_posix()}"
    else:
        with postgres_schema() as schema:
            yield postgres_url_for(schema)


def _children(pid: int) -> list[int]:
    """The server processes uvicorn started under ``pid`` (its resource tracker left out)."""
    out = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
            cmdline = (entry / "cmdline").read_bytes()
        except OSError:
            continue
        ppid = int(stat.rsplit(")", 1)[1].split()[1])
        if ppid == pid and b"spawn_main" in cmdline:
            out.append(int(entry.name))
    return sorted(out)


def _cpu_ticks(pid: int) -> int:
    fields = Path(f"/proc/{pid}/stat").read_text().rsplit(")", 1)[1].split()
    return int(fields[11]) + int(fields[12])  # utime + stime


@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_several_processes_serve_one_store_and_lose_nothing(url: str, tmp_path: Path) -> None:
    home = tmp_path / "home"
    mem = Memory.open(url, settings=Settings(home=home, worker="off"))
    try:
        key = mem.keys.create("acme", user="alice")[1]
        cids = [mem.conversations.create(ALICE, title=f"client {n}").id for n in range(CLIENTS)]
        env = server_env(home=str(home), log_level="WARNING", recall_embed="off")
        log = tmp_path / "server.log"
        with memstrata_serve(url, env, log, WAIT_SECONDS, "--processes", str(PROCESSES)) as (
            proc,
            base,
        ):
            children = _children(proc.pid)
            assert len(children) == PROCESSES, log.read_text()
            before = {pid: _cpu_ticks(pid) for pid in children}
            sent: dict[str, list[str]] = {cid: [] for cid in cids}
            failures: list[str] = []

            def client(cid: str) -> None:
                headers = {"Authorization": f"Bearer {key}", "Connection": "close"}
                with httpx.Client(base_url=base, headers=headers, trust_env=False) as http:
                    for i in range(PER_CLIENT):
                        body = {"role": "user" if i % 2 == 0 else "assistant", "content": f"{i}"}
                        r = http.post(f"/v1/conversations/{cid}/messages", json=body, timeout=60)
                        if r.status_code != 201:
                            failures.append(f"{r.status_code} {r.text}")
                            return
                        sent[cid].append(r.json()["id"])

            threads = [threading.Thread(target=client, args=(cid,)) for cid in cids]
            for t in threads:
                t.start()
            for t in threads:
                t.join(WAIT_SECONDS)
            assert failures == []
            # Each process took part: both spent CPU on the requests.
            grew = {pid: _cpu_ticks(pid) - before[pid] for pid in children}
            assert all(v > 0 for v in grew.values()), grew
        for cid, ids in sent.items():
            path = mem.messages.path(ALICE, cid)
            assert [m.id for m in path] == ids  # one chain, in the client's order, no gaps
            assert [m.content for m in path] == [str(i) for i in range(PER_CLIENT)]
    finally:
        mem.close()


def test_a_store_in_one_process_memory_is_refused(tmp_path: Path) -> None:
    env = {"MEMSTRATA_HOME": str(tmp_path), "MEMSTRATA_DB": None}
    runner = CliRunner()
    result = runner.invoke(app, ["serve", "--processes", "2", "--db", "sqlite://"], env=env)
    assert result.exit_code == 1
    assert "--processes needs a database every process can open" in result.stderr
    memory_blobs = {**env, "MEMSTRATA_BLOBS": "memory://"}
    db = f"sqlite:///{(tmp_path / 'f.db').as_posix()}"
    result = runner.invoke(app, ["serve", "--processes", "2", "--db", db], env=memory_blobs)
    assert result.exit_code == 1
    assert "memory:// lives in one process" in result.stderr
    assert "MEMSTRATA_DB" not in os.environ  # refused before anything was set up
