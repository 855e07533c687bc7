"""The engine conformance suite on SQLite and PostgreSQL."""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest

from memstrata.storage.engine import Engine
from memstrata.storage.plan import Query, Request
from memstrata.testing.conformance import EngineConformance
from support import open_memory


class TestEngines(EngineConformance):
    @pytest.fixture(params=["sqlite-file", "sqlite-memory", "postgres"])
    def engine(self, request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Engine]:
        for mem in open_memory(request.param, tmp_path):
            yield mem.core.engine

    @pytest.fixture
    def lost_connection(self, engine: Engine) -> Request | None:
        # PostgreSQL ends the very connection that asks; SQLite has none to lose.
        if engine.dialect != "postgres":
            return None
        return Query("SELECT pg_terminate_backend(pg_backend_pid())")
