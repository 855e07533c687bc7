"""The backend conformance suite: one set of tests every storage backend must pass.

The classes here are pytest mixins, one module per concern. A backend's test module
subclasses them and provides a fixture named ``memory`` that yields an open
:class:`~memstrata.Memory` on that backend::

    import pytest
    from memstrata import Memory
    from memstrata.testing.conformance import BackendConformance

    class TestMyBackend(BackendConformance):
        @pytest.fixture
        def memory(self, tmp_path):
            mem = Memory.open("mydb://...")
            yield mem
            mem.close()

Tests go through the public facade (sync, and async for a subset) and look at
raw rows only through the engine's own plans, with SQL in the dialect subset
every backend accepts. Every test works in its own freshly named tenant, so a
backend may share one database between tests.
"""

from __future__ import annotations

from memstrata.testing.conformance.cascade import CascadeConformance
from memstrata.testing.conformance.conversations import ConversationConformance
from memstrata.testing.conformance.engine import EngineConformance
from memstrata.testing.conformance.graph import GraphConformance
from memstrata.testing.conformance.helpers import (
    fresh_scope,
    memory_with_settings,
    scope_state,
    sql_exec,
    sql_rows,
)
from memstrata.testing.conformance.history import HistoryConformance
from memstrata.testing.conformance.keys import KeysConformance
from memstrata.testing.conformance.messages import AppendConformance
from memstrata.testing.conformance.migrations import MigrationConformance
from memstrata.testing.conformance.parity import AsyncParityConformance
from memstrata.testing.conformance.state import StateConformance

__all__ = [
    "AppendConformance",
    "AsyncParityConformance",
    "BackendConformance",
    "CascadeConformance",
    "ConversationConformance",
    "EngineConformance",
    "GraphConformance",
    "HistoryConformance",
    "KeysConformance",
    "MigrationConformance",
    "StateConformance",
    "fresh_scope",
    "memory_with_settings",
    "scope_state",
    "sql_exec",
    "sql_rows",
]


class BackendConformance(
    StateConformance,
    GraphConformance,
    ConversationConformance,
    AppendConformance,
    HistoryConformance,
    CascadeConformance,
    MigrationConformance,
    KeysConformance,
    AsyncParityConformance,
):
    """Every conformance test; a backend's test class inherits this and provides ``memory``."""
