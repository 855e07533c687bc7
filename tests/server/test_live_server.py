"""``memstrata serve`` as a real process: first-start key, CLI keys taking effect at once.

Only loopback traffic. Waits are bounded loops (to fail instead of hanging), never
timing assertions; the server process is always stopped.
"""

from __future__ import annotations

import json
import os
import queue
import re
import subprocess
import sys
import threading
import time
from collections.abc import Iterator
from pathlib import Path

import httpx
import pytest

from memstrata.config import Settings
from support import free_port, stop

pytestmark = pytest.mark.server

KEY = re.compile(r"msk_[0-9a-f]{12}_[A-Za-z0-9_-]{20,}")
WAIT_SECONDS = 90  # upper bound for start-up on a loaded CI machine, not an expectation


def _cli(*args: str) -> list[str]:
    return [sys.executable, "-m", "memstrata.cli", *args]


class Server:
    def __init__(self, proc: subprocess.Popen[str]) -> None:
        self.proc = proc
        self.lines: queue.Queue[str] = queue.Queue()
        self.output: list[str] = []
        threading.Thread(target=self._pump, daemon=True).start()

    def _pump(self) -> None:
        assert self.proc.stdout is not None
        for line in self.proc.stdout:
            self.lines.put(line)

    def wait_for_key(self) -> str:
        deadline = time.monotonic() + WAIT_SECONDS
        while time.monotonic() < deadline:
            try:
                line = self.lines.get(timeout=0.2)
            except queue.Empty:
                if self.proc.poll() is not None:
                    break
                continue
            self.output.append(line)
            if m := KEY.search(line):
                return m.group(0)
        pytest.fail("no first-start key printed:\n" + "".join(self.output))

    def wait_ready(self, base: str) -> None:
        deadline = time.monotonic() + WAIT_SECONDS
        with httpx.Client(base_url=base, trust_env=False, timeout=5) as c:
            while time.monotonic() < deadline:
                if self.proc.poll() is not None:
                    break
                try:
                    if c.get("/readyz").status_code == 200:
                        return
                except httpx.TransportError:
                    pass
                time.sleep(0.1)
        pytest.fail("server did not become ready:\n" + "".join(self.output))


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[Server, str, str, dict[str, str]]]:
    port = free_port()
    db = f"sqlite:///{(tmp_path / 'live.db').as_posix()}"
    env = {**os.environ, "MEMSTRATA_HOME": str(tmp_path / "home"), "PYTHONUNBUFFERED": "1"}
    proc = subprocess.Popen(
        _cli("serve", "--host", "127.0.0.1", "--port", str(port), "--db", db),
        stdout=subprocess.PIPE,
        stderr=subprocess.STDOUT,
        stdin=subprocess.DEVNULL,
        env=env,
        text=True,
    )
    try:
        yield Server(proc), f"http://127.0.0.1:{port}", db, env
    finally:
        stop(proc)
        if proc.stdout is not None:
            proc.stdout.close()


def _run_cli(env: dict[str, str], *args: str) -> subprocess.CompletedProcess[str]:
    done = subprocess.run(
        _cli(*args), env=env, capture_output=True, text=True, timeout=120, check=False
    )
    assert done.returncode == 0, done.stderr
    return done


def test_serve_first_start_key_and_cli_keys_at_once(served) -> None:
    server, base, db, env = served
    first_key = server.wait_for_key()
    server.wait_ready(base)
    with httpx.Client(base_url=base, trust_env=False, timeout=30) as c:
        local = {"Authorization": f"Bearer {first_key}"}
        r = c.post("/v1/conversations", json={"title": "local"}, headers=local)
        assert r.status_code == 201
        listed = c.get("/v1/conversations", headers=local)
        assert listed.status_code == 200
        assert [x["title"] for x in listed.json()["items"]] == ["local"]

        # A key made by the CLI against the same database works on the running server at once.
        made = _run_cli(env, "keys", "create", "--tenant", "t2", "--user", "u2", "--db", db)
        lines = made.stdout.splitlines()
        assert len(lines) == 1
        assert KEY.fullmatch(lines[0])
        new = {"Authorization": f"Bearer {lines[0]}"}
        assert c.post("/v1/conversations", json={"title": "t2"}, headers=new).status_code == 201
        assert [x["title"] for x in c.get("/v1/conversations", headers=new).json()["items"]] == [
            "t2"
        ]

        # Revoked with the CLI: refused within the server's key cache time (1 s by default;
        # the CLI process starts in more than that, so the first try is usually refused).
        listing = _run_cli(env, "keys", "list", "--tenant", "t2", "--json", "--db", db)
        (entry,) = json.loads(listing.stdout)
        _run_cli(env, "keys", "revoke", entry["id"], "--db", db)
        refused_by = time.monotonic() + Settings().key_cache_s + 0.5
        r = c.get("/v1/conversations", headers=new)
        while r.status_code == 200 and time.monotonic() < refused_by:
            time.sleep(0.1)
            r = c.get("/v1/conversations", headers=new)
        assert r.status_code == 401
        assert r.headers["content-type"].startswith("application/problem+json")
        # The first-start key is unaffected.
        assert c.get("/v1/conversations", headers=local).status_code == 200
