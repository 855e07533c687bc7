"""``memstrata serve`` in a process of its own, for the benchmarks that drive a real server.

Its own interpreter and GIL, as deployed, on a free loopback port; nothing leaves the
machine. The CPU the server spends is read from ``/proc`` for the process and every
process it started (``--processes N`` runs workers under one parent).
"""

from __future__ import annotations

import os
import socket
import subprocess
import sys
import time
from collections.abc import Mapping
from pathlib import Path
from types import TracebackType

__all__ = ["ServerProcess", "cpu_seconds"]

_TICKS = os.sysconf("SC_CLK_TCK") if hasattr(os, "sysconf") else 100


def _stat(pid: int) -> tuple[int, float] | None:
    """(parent pid, user + system CPU seconds) of one process, or None once it is gone."""
    try:
        text = Path(f"/proc/{pid}/stat").read_text(encoding="ascii", errors="replace")
    except OSError:
        return None
    # The command name (field 2) may hold spaces: split after its closing parenthesis.
    fields = text[text.rindex(")") + 2 :].split()
    ppid, utime, stime = int(fields[1]), int(fields[11]), int(fields[12])
    return ppid, (utime + stime) / _TICKS


def _descendants(root: int) -> list[int]:
    parents: dict[int, int] = {}
    for entry in Path("/proc").iterdir():
        if entry.name.isdigit():
            st = _stat(int(entry.name))
            if st is not None:
                parents[int(entry.name)] = st[0]
    found, frontier = [root], [root]
    while frontier:
        nxt = [pid for pid, ppid in parents.items() if ppid in frontier]
        found += nxt
        frontier = nxt
    return found


def cpu_seconds(root: int) -> dict[int, float]:
    """CPU seconds so far of ``root`` and each of its descendants, by pid."""
    out: dict[int, float] = {}
    for pid in _descendants(root):
        st = _stat(pid)
        if st is not None:
            out[pid] = st[1]
    return out


class ServerProcess:
    """Runs ``memstrata serve --db URL`` with ``env`` over the current environment."""

    def __init__(
        self, url: str, home: Path, processes: int = 1, env: Mapping[str, str] | None = None
    ) -> None:
        with socket.socket(socket.AF_INET, socket.SOCK_STREAM, socket.IPPROTO_TCP) as s:
            s.bind(("127.0.0.1", 0))
            self.port = s.getsockname()[1]
        self.base = f"http://127.0.0.1:{self.port}"
        self.command = [
            sys.executable,
            "-m",
            "memstrata",
            "serve",
            "--host",
            "127.0.0.1",
            "--port",
            str(self.port),
            "--db",
            url,
            "--processes",
            str(processes),
        ]
        self.home = home
        self.env = {**os.environ, "MEMSTRATA_HOME": str(home), **(env or {})}
        self.process: subprocess.Popen[bytes] | None = None

    @property
    def pid(self) -> int:
        if self.process is None:
            raise RuntimeError("the server is not running")
        return self.process.pid

    def __enter__(self) -> ServerProcess:
        import httpx

        # Logs go to a file, not a pipe: a pipe nobody reads would block a chatty server.
        self.log = open(self.home / "server.log", "wb")
        self.process = subprocess.Popen(
            self.command, env=self.env, stdout=subprocess.DEVNULL, stderr=self.log
        )
        deadline = time.monotonic() + 60
        while True:
            if self.process.poll() is not None:
                err = (self.home / "server.log").read_text(errors="replace")
                self.log.close()
                raise RuntimeError(f"the server exited: {err[-2000:]}")
            try:
                if httpx.get(self.base + "/healthz", timeout=1).status_code == 200:
                    return self
            except httpx.HTTPError:
                pass
            if time.monotonic() > deadline:
                self.__exit__(None, None, None)
                raise RuntimeError("the server did not start")
            time.sleep(0.1)

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        if self.process is not None:
            self.process.terminate()
            try:
                self.process.wait(30)
            except subprocess.TimeoutExpired:
                self.process.kill()
                self.process.wait()
            self.log.close()
