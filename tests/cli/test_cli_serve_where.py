"""``memstrata serve`` listens where it is told (MEMSTRATA_PORT / MEMSTRATA_HOST, --port),
says where it listens, and fails in one line on a port that is taken."""

from __future__ import annotations

import socket
import subprocess
import time
from pathlib import Path

import httpx
import pytest

from support import CLI, SERVER_WAIT_SECONDS, free_port, server_env, stop

pytestmark = pytest.mark.server


def _banner_when_ready(proc: subprocess.Popen[str], base: str) -> str:
    deadline = time.monotonic() + SERVER_WAIT_SECONDS
    with httpx.Client(base_url=base, trust_env=False, timeout=5) as c:
        while time.monotonic() < deadline and proc.poll() is None:
            try:
                if c.get("/readyz").status_code == 200:
                    break
            except httpx.TransportError:
                time.sleep(0.1)
    assert proc.poll() is None, "the server exited"
    stop(proc)
    assert proc.stderr is not None
    return proc.stderr.read()


def test_serve_honours_memstrata_port_and_host(tmp_path: Path):
    port = free_port()
    env = server_env(home=str(tmp_path / "home"), port=str(port), host="127.0.0.1")
    db = f"sqlite:///{(tmp_path / 's.db').as_posix()}"
    proc = subprocess.Popen(
        [*CLI, "serve", "--db", db],
        stdout=subprocess.DEVNULL,
        stderr=subprocess.PIPE,
        stdin=subprocess.DEVNULL,
        env=env,
        text=True,
    )
    banner = _banner_when_ready(proc, f"http://127.0.0.1:{port}")
    assert f"on http://127.0.0.1:{port}\n" in banner
    assert f"UI    http://localhost:{port}/" in banner


def test_serve_on_a_taken_port_is_one_line_naming_it_and_the_fix(tmp_path: Path):
    with socket.socket() as held:
        held.bind(("127.0.0.1", 0))
        held.listen()
        port = held.getsockname()[1]
        db = tmp_path / "s.db"
        done = subprocess.run(
            [*CLI, "serve", "--port", str(port), "--db", f"sqlite:///{db.as_posix()}"],
            env=server_env(home=str(tmp_path / "home")),
            capture_output=True,
            text=True,
            timeout=120,
            check=False,
        )
    assert done.returncode != 0
    lines = done.stderr.strip().splitlines()
    assert len(lines) == 1, done.stderr
    assert f"127.0.0.1:{port}" in lines[0]
    assert "--port" in lines[0]
    assert "MEMSTRATA_PORT" in lines[0]
    assert not db.exists()  # nothing was created for a server that could not listen
    assert "serving" not in done.stderr + done.stdout
