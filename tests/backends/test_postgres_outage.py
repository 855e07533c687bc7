"""N2 (issue 28): a PostgreSQL outage is answered in seconds. The database connection runs
through a local TCP proxy (``memstrata.testing.tcpproxy``) that the tests cut and restore,
so no server is stopped. Waits here are bounded loops, never timing checks: speed is
measured by ``scripts/measure_outage.py`` (docs/reliability.md)."""

from __future__ import annotations

import signal
import subprocess
import time
from collections.abc import Iterator
from pathlib import Path
from urllib.parse import urlsplit

import httpx
import pytest

from memstrata import Memory, Scope
from memstrata.config import Settings
from memstrata.errors import BackendUnavailable
from memstrata.testing.tcpproxy import CuttableProxy
from support import (
    POSTGRES_URL,
    SERVER_WAIT_SECONDS,
    memstrata_serve,
    postgres_schema,
    postgres_url_for,
    server_env,
)

pytestmark = pytest.mark.xdist_group("postgres")
S = Scope("outage", "u")


def _through(proxy: CuttableProxy, url: str) -> str:
    parts = urlsplit(url)
    netloc = parts.netloc.replace(
        f"{parts.hostname}:{parts.port or 5432}", f"127.0.0.1:{proxy.port}"
    )
    return parts._replace(netloc=netloc).geturl()


@pytest.fixture
def proxied() -> Iterator[tuple[CuttableProxy, str]]:
    """(proxy, database URL through it) on a fresh schema."""
    target = urlsplit(POSTGRES_URL)
    with (
        postgres_schema() as schema,
        CuttableProxy(target.hostname or "127.0.0.1", target.port or 5432) as proxy,
    ):
        yield proxy, _through(proxy, postgres_url_for(schema))


def _until(check, what: str, tries: int = 200, pause: float = 0.05):  # type: ignore[no-untyped-def]
    """Call ``check`` until it returns something true (bounded, not a timing check)."""
    for _ in range(tries):
        result = check()
        if result:
            return result
        time.sleep(pause)
    pytest.fail(f"never: {what}")


def test_n2_an_outage_fails_fast_then_recovers(
    proxied: tuple[CuttableProxy, str], tmp_path: Path
) -> None:
    proxy, url = proxied
    mem = Memory.open(url, settings=Settings(home=tmp_path, worker="off", postgres_wait_s=5.0))
    try:
        cid = mem.conversations.create(S).id
        proxy.cut()
        with pytest.raises(BackendUnavailable):
            mem.conversations.get(S, cid)
        # The breaker is open: calls fail without trying to connect, except a probe now
        # and then (at most one per quarter second; 20 calls right away make none or one).
        before = proxy.attempts
        for _ in range(20):
            with pytest.raises(BackendUnavailable):
                mem.messages.append(S, cid, role="user", content="lost")
        assert proxy.attempts - before <= 1
        assert mem.core.check()["postgres"] != "ok"  # readiness connects itself: refused

        proxy.restore()
        # Service returns with the first probe after the database does: fresh pools, not
        # ones deep in their reconnect backoff.
        _until(lambda: mem.core.check()["postgres"] == "ok", "readiness after restore")
        assert mem.messages.append(S, cid, role="user", content="back").content == "back"
        assert [m.content for m in mem.history(S, cid).messages] == ["back"]
    finally:
        mem.close()


def test_n2_async_paths_fail_fast_and_recover(
    proxied: tuple[CuttableProxy, str], tmp_path: Path
) -> None:
    import anyio

    from memstrata import AsyncMemory

    proxy, url = proxied

    async def main() -> None:
        mem = AsyncMemory.open(url, settings=Settings(home=tmp_path, worker="off"))
        try:
            cid = (await mem.conversations.create(S)).id
            proxy.cut()
            with pytest.raises(BackendUnavailable):
                await mem.conversations.get(S, cid)
            before = proxy.attempts
            for _ in range(20):
                with pytest.raises(BackendUnavailable):
                    await mem.conversations.get(S, cid)
            assert proxy.attempts - before <= 1
            proxy.restore()
            for _ in range(200):
                try:
                    await mem.conversations.get(S, cid)
                    break
                except BackendUnavailable:
                    await anyio.sleep(0.05)
            assert (await mem.conversations.get(S, cid)).id == cid
        finally:
            await mem.close()

    anyio.run(main)


def test_n2_rest_answers_503_problem_json_and_readyz_then_recovers(
    proxied: tuple[CuttableProxy, str], tmp_path: Path
) -> None:
    proxy, url = proxied
    key = subprocess.run(
        [*_cli(), "keys", "create", "--tenant", "outage", "--user", "u", "--db", url],
        capture_output=True, text=True, check=True, env=server_env(home=str(tmp_path)),
    ).stdout.strip()  # fmt: skip
    env = server_env(home=str(tmp_path), postgres_wait_s="3")
    with memstrata_serve(url, env, tmp_path / "serve.log", SERVER_WAIT_SECONDS) as (proc, base):
        h = {"Authorization": f"Bearer {key}"}
        with httpx.Client(base_url=base, trust_env=False, timeout=30) as c:
            assert c.get("/v1/conversations", headers=h).status_code == 200
            proxy.cut()
            for path in ("/readyz", "/v1/conversations"):
                r = c.get(path, headers=h)
                assert r.status_code == 503, r.text
                assert r.headers["content-type"].startswith("application/problem+json")
                assert "postgres" in r.text.lower() or "unavailable" in r.text.lower()
            proxy.restore()
            _until(lambda: c.get("/readyz").status_code == 200, "/readyz 200 after restore")
            assert c.post("/v1/conversations", json={}, headers=h).status_code == 201

            # SIGTERM during an outage: the server still exits, and says so.
            proxy.cut()
            assert c.get("/readyz").status_code == 503
            proc.send_signal(signal.SIGTERM)
            # uvicorn ends by re-raising the signal it handled
            assert proc.wait(timeout=SERVER_WAIT_SECONDS) in (0, -signal.SIGTERM)
    assert "Finished server process" in (tmp_path / "serve.log").read_text()


def _cli() -> list[str]:
    from support import CLI

    return list(CLI)
