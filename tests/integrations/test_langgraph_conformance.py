"""LangGraph's checkpointer conformance suite (``langgraph-checkpoint-conformance``)
against both memstrata savers, on SQLite and on PostgreSQL.

Every capability the suite knows is required to pass: the five base ones (put,
put_writes, get_tuple, list, delete_thread) and the extended ones (delete_for_runs,
copy_thread, prune). Each capability gets a saver with a scope of its own, so the
suite's "list everything" sees only its own threads.
"""

from __future__ import annotations

import asyncio
import itertools
from collections.abc import AsyncGenerator, Iterator
from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from lazy_names import lazy
from memstrata import AsyncMemory, Memory, Scope
from support import open_memory

if TYPE_CHECKING:
    from langgraph.checkpoint.conformance import checkpointer_test, validate
    from langgraph.checkpoint.conformance.capabilities import ALL_CAPABILITIES

    from memstrata.integrations.langgraph import AsyncMemstrataSaver, MemstrataSaver
else:
    checkpointer_test, validate = lazy(
        "langgraph.checkpoint.conformance", "checkpointer_test", "validate"
    )
    (ALL_CAPABILITIES,) = lazy("langgraph.checkpoint.conformance.capabilities", "ALL_CAPABILITIES")
    AsyncMemstrataSaver, MemstrataSaver = lazy(
        "memstrata.integrations.langgraph", "AsyncMemstrataSaver", "MemstrataSaver"
    )

_users = itertools.count()


@pytest.fixture(params=["sqlite-file", "postgres"])
def store(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    yield from open_memory(request.param, tmp_path)


def _report(mem: Memory, flavour: str) -> dict[str, int]:
    @checkpointer_test(name=f"memstrata-{flavour}")
    async def saver() -> AsyncGenerator[MemstrataSaver | AsyncMemstrataSaver, None]:
        scope = Scope("conformance", f"u{next(_users)}")
        if flavour == "async":
            yield AsyncMemstrataSaver(AsyncMemory(mem.core), scope)
        else:
            yield MemstrataSaver(mem, scope)

    report = asyncio.run(validate(saver))
    failures = {
        name: result.failures
        for name, result in report.results.items()
        if result.passed is not True
    }
    assert not failures, failures
    assert {c.value for c in ALL_CAPABILITIES} == set(report.results)
    return {name: result.tests_passed for name, result in report.results.items()}


def test_async_saver_passes_the_conformance_suite(store: Memory) -> None:
    passed = _report(store, "async")
    assert all(n > 0 for n in passed.values()), passed


def test_sync_saver_passes_the_conformance_suite(store: Memory) -> None:
    passed = _report(store, "sync")
    assert all(n > 0 for n in passed.values()), passed
