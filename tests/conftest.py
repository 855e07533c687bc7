"""Shared test set-up: the backend-parametrized ``memory`` fixture, hypothesis
profiles, and the CI rule that a test skipped for a missing server fails the run."""

from __future__ import annotations

import logging
import os
import re
from collections.abc import Callable, Generator, Iterator, Mapping
from contextlib import ExitStack
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

import pytest
from hypothesis import HealthCheck, settings

import lazy_names
from memstrata import Memory
from memstrata.testing import override
from support import memory_on_postgres, open_memory, pgvector_url, schema_on  # noqa: F401

pytest_plugins = ["pytester"]


# -- backends --------------------------------------------------------------------------------


@dataclass(frozen=True)
class Backend:
    """The ``support.open_memory`` kind of one backend, and the marks its tests carry."""

    kind: str
    marks: tuple[pytest.MarkDecorator, ...] = field(default=())


# One entry per backend; the ``memory`` fixture runs every test that uses it on each.
# A backend that needs a server skips with a reason naming it (see support.py), which
# CI turns into a failure.
BACKENDS: dict[str, Backend] = {
    "sqlite-file": Backend("sqlite-file", (pytest.mark.xdist_group("sqlite-file"),)),
    "sqlite-memory": Backend("sqlite-memory", (pytest.mark.xdist_group("sqlite-memory"),)),
    "postgres": Backend("postgres", (pytest.mark.xdist_group("postgres"),)),
    # PostgreSQL with the vector extension (an embedded server, one per session).
    "postgres-pgvector": Backend("postgres-pgvector", (pytest.mark.xdist_group("pgvector"),)),
}


def _open(request: pytest.FixtureRequest, tmp: Path) -> Iterator[Memory]:
    kind = BACKENDS[request.param].kind
    if kind != "postgres-pgvector":
        yield from open_memory(kind, tmp)
        return
    url = request.getfixturevalue("pgvector_url")
    with schema_on(url) as schema:
        mem = memory_on_postgres(url, schema, tmp)
        try:
            yield mem
        finally:
            mem.close()


@pytest.fixture(autouse=True)
def _logging_as_it_was() -> Iterator[None]:
    """Undo what a test's in-process `serve`/`worker`/`mcp` command does to logging
    (memstrata.logs.configure_logging: its own handler, no propagation), so a later test in
    the same worker still sees memstrata's records through caplog."""
    # Every memstrata logger too: a library that configures logging with
    # disable_existing_loggers (dictConfig's default) turns them off for the whole worker.
    names = {"memstrata", "uvicorn.error"} | {
        name for name in logging.root.manager.loggerDict if name.startswith("memstrata.")
    }
    saved = [
        (logger, logger.handlers[:], logger.level, logger.propagate, logger.disabled)
        for logger in map(logging.getLogger, sorted(names))
    ]
    yield
    for logger, handlers, level, propagate, disabled in saved:
        logger.handlers[:] = handlers
        logger.setLevel(level)
        logger.propagate = propagate
        logger.disabled = disabled


@pytest.fixture(params=[pytest.param(name, marks=b.marks, id=name) for name, b in BACKENDS.items()])
def memory(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    """A fresh, open memory on each backend in turn (PostgreSQL: a schema of its own)."""
    yield from _open(request, tmp_path)


@pytest.fixture(
    scope="module",
    params=[pytest.param(name, marks=b.marks, id=name) for name, b in BACKENDS.items()],
)
def module_memory(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[Memory]:
    """One memory per test module and backend, for tests that build a large store once
    (and for hypothesis, which cannot reset a function-scoped fixture between examples)."""
    yield from _open(request, tmp_path_factory.mktemp(request.param))


# -- hypothesis profiles ---------------------------------------------------------------------


def ci_enabled(environ: Mapping[str, str]) -> bool:
    return environ.get("CI", "").strip().lower() in {"1", "true", "yes"}


# CI: the same examples on every run (derandomize), no example database to carry between
# runs, fewer examples; "dev" explores more and remembers failures in .hypothesis/.
settings.register_profile(
    "ci",
    max_examples=100,
    derandomize=True,
    database=None,
    deadline=None,
    print_blob=True,
    suppress_health_check=[HealthCheck.too_slow],
)
settings.register_profile(
    "dev", max_examples=200, deadline=None, suppress_health_check=[HealthCheck.too_slow]
)
settings.load_profile(
    os.environ.get("HYPOTHESIS_PROFILE") or ("ci" if ci_enabled(os.environ) else "dev")
)


# -- CI: a test skipped for want of a server is a failure ------------------------------------

# A skip reason that names one of the servers the suite can need. Tests that need a
# server skip with such a reason ("needs a PostgreSQL server: ..."), so this rule finds them.
SERVER_SKIP = re.compile(r"\b(server|postgres(ql)?|pg|redis|s3|minio|moto|docker)\b", re.IGNORECASE)


def skip_reason(report: pytest.TestReport) -> str:
    """The reason of a skipped report (pytest stores ``(path, line, reason)``)."""
    longrepr: Any = report.longrepr
    text = str(longrepr[2]) if isinstance(longrepr, tuple) and len(longrepr) == 3 else str(longrepr)
    return text.removeprefix("Skipped: ")


def server_skip_to_failure(report: pytest.TestReport, environ: Mapping[str, str]) -> bool:
    """Turn ``report`` into a failure if CI is on and it was skipped for a missing server.

    Returns whether it changed the report. Kept apart from the hook so it can be
    unit-tested with a hand-made report.
    """
    if not report.skipped or not ci_enabled(environ) or hasattr(report, "wasxfail"):
        return False
    reason = skip_reason(report)
    if not SERVER_SKIP.search(reason):
        return False
    report.outcome = "failed"
    report.longrepr = (
        f"CI=true: this test was skipped because a server is missing ({reason}); "
        "in CI every server must be available"
    )
    return True


@pytest.hookimpl(wrapper=True)
def pytest_runtest_makereport(
    item: pytest.Item, call: pytest.CallInfo[None]
) -> Generator[None, pytest.TestReport, pytest.TestReport]:
    report: pytest.TestReport = yield
    server_skip_to_failure(report, os.environ)
    return report


@pytest.hookimpl(tryfirst=True)
def pytest_runtest_setup(item: pytest.Item) -> None:
    """Frameworks a test module names through ``lazy_names`` are imported now, before its
    fixtures and tests run, not when the suite is collected."""
    module = getattr(item, "module", None)
    if module is not None:
        lazy_names.resolve(vars(module))


@pytest.fixture
def models() -> Iterator[Callable[..., None]]:
    """``models(memory, facts_llm=..., ...)``: :func:`memstrata.testing.override` for the rest
    of the test (the models before it are back at teardown)."""
    with ExitStack() as stack:

        def use(memory: Any, **swap: Any) -> None:
            stack.enter_context(override(memory, **swap))

        yield use
