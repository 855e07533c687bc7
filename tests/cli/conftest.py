"""Running CLI commands in process against a test database (shared by the CLI tests)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from typer.testing import CliRunner


@pytest.fixture
def db(tmp_path: Path) -> str:
    """A store that exists, as the server's does (commands refuse a missing one)."""
    from memstrata import Memory
    from memstrata.config import Settings

    url = f"sqlite:///{(tmp_path / 'cli.db').as_posix()}"
    Memory.open(url, settings=Settings(home=tmp_path / "home", worker="off")).close()
    return url


@pytest.fixture
def cli_env(tmp_path: Path) -> dict[str, str | None]:
    """The environment of each command: no model, no embedder (a test overrides it)."""
    return {
        "MEMSTRATA_HOME": str(tmp_path / "home"),
        "MEMSTRATA_DB": None,
        "MEMSTRATA_LLM_MODEL": None,
        "MEMSTRATA_LLM_BASE_URL": None,
        "MEMSTRATA_EMBEDDER": "none",
        "COLUMNS": "250",  # one table row per line, whatever the terminal of the test run
    }


@pytest.fixture
def run(db: str, cli_env: dict[str, str | None]) -> Callable[..., Any]:
    """Run one command against the test database; asserts the exit code."""
    from memstrata.cli import app

    runner = CliRunner()

    def _run(*args: str, code: int = 0) -> Any:
        result = runner.invoke(app, [*args, "--db", db], env=cli_env)
        assert result.exit_code == code, (result.stdout, result.stderr, result.exception)
        return result

    return _run
