"""Fixtures for the REST tests: a store on a temporary SQLite file, keys, an in-process client.

The app runs in the test's event loop through httpx's ASGI transport, so no
socket is opened. Keys are made through a separate sync ``Memory`` on the same
file, the way the CLI makes them next to a running server.
"""

from __future__ import annotations

from collections.abc import AsyncIterator, Callable, Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from memstrata import AsyncMemory, Memory
from memstrata.config import Settings
from memstrata.server import create_app

PROBLEM_JSON = "application/problem+json"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def db_url(tmp_path: Path) -> str:
    return f"sqlite:///{(tmp_path / 'rest.db').as_posix()}"


@pytest.fixture
def admin_mem(db_url: str) -> Iterator[Memory]:
    """A second handle on the same database, for setting up keys and checking state."""
    mem = Memory.open(db_url)
    yield mem
    mem.close()


@pytest.fixture
def amemory(db_url: str) -> Iterator[AsyncMemory]:
    mem = AsyncMemory.open(db_url)
    yield mem
    mem.core.close()


@pytest.fixture
def settings(db_url: str) -> Settings:
    return Settings(db=db_url)


@pytest.fixture
def app(amemory: AsyncMemory, settings: Settings) -> FastAPI:
    return create_app(amemory, settings)


@pytest.fixture
async def client(app: FastAPI) -> AsyncIterator[httpx.AsyncClient]:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    async with httpx.AsyncClient(transport=transport, base_url="http://memstrata.test") as c:
        yield c


@dataclass(frozen=True)
class Keys:
    """Secrets of the keys every test can use."""

    alice: str  # tenant t1, user alice
    bob: str  # tenant t1, user bob
    admin: str  # tenant t1 admin
    other_admin: str  # tenant t2 admin
    carol: str  # tenant t2, user carol


@pytest.fixture
def keys(admin_mem: Memory) -> Keys:
    return Keys(
        alice=admin_mem.keys.create("t1", user="alice")[1],
        bob=admin_mem.keys.create("t1", user="bob")[1],
        admin=admin_mem.keys.create("t1", admin=True)[1],
        other_admin=admin_mem.keys.create("t2", admin=True)[1],
        carol=admin_mem.keys.create("t2", user="carol")[1],
    )


def bearer(key: str, *, user: str | None = None, agent: str | None = None) -> dict[str, str]:
    headers = {"Authorization": f"Bearer {key}"}
    if user is not None:
        headers["X-Memstrata-User"] = user
    if agent is not None:
        headers["X-Memstrata-Agent"] = agent
    return headers


def check_problem(response: httpx.Response, status: int, code: str | None = None) -> dict[str, Any]:
    """Assert an RFC 9457 problem with ``status``; returns its body."""
    assert response.status_code == status, response.text
    assert response.headers["content-type"].startswith(PROBLEM_JSON), response.headers
    body: dict[str, Any] = response.json()
    assert body["status"] == status
    assert isinstance(body["title"], str)
    assert body["title"]
    assert isinstance(body["detail"], str)
    assert body["detail"]
    assert body["type"].endswith(body["code"])
    if code is not None:
        assert body["code"] == code, body
    return body


@pytest.fixture
def auth() -> Callable[..., dict[str, str]]:
    return bearer


@pytest.fixture
def problem() -> Callable[..., dict[str, Any]]:
    return check_problem
