"""Fixtures for the LangChain and LangGraph integration tests: a SQLite memory with no
background worker, its async twin on the same store, and tracing kept off (no network)."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memstrata import AsyncMemory, Memory
from memstrata.config import Settings


@pytest.fixture(autouse=True)
def _no_tracing(monkeypatch: pytest.MonkeyPatch) -> None:
    for name in ("LANGCHAIN_TRACING_V2", "LANGCHAIN_TRACING", "LANGSMITH_TRACING"):
        monkeypatch.setenv(name, "false")
    for name in ("LANGCHAIN_API_KEY", "LANGSMITH_API_KEY", "LANGSMITH_ENDPOINT"):
        monkeypatch.delenv(name, raising=False)


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    memory = Memory.open(
        f"sqlite:///{tmp_path / 'm.db'}", settings=Settings(home=tmp_path, worker="off")
    )
    yield memory
    memory.close()


@pytest.fixture
def amem(mem: Memory) -> AsyncMemory:
    """The same store through the async facade (closed with ``mem``)."""
    return AsyncMemory(mem.core)
