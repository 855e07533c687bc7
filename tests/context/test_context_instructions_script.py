"""scripts/context_instructions.py builds the context benchmark's store and runs the
calls it counts (valgrind itself is not needed here: the counted process is run bare)."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType

import pytest

from support import load_script, store_file

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "context_instructions.py"


def _load() -> ModuleType:
    return load_script("context_instructions")


def test_the_store_is_built_and_the_counted_calls_run(tmp_path: Path) -> None:
    script = _load()
    script.build(tmp_path, 40, neighbours=2)
    assert (tmp_path / "conversation").read_text()
    with store_file(tmp_path / "m.db") as conn:
        counts = conn.execute(
            "SELECT c.user_id, count(*) FROM messages m JOIN conversations c "
            "ON c.id = m.conversation_id WHERE c.user_id LIKE 'neighbour-%' GROUP BY c.user_id"
        ).fetchall()
    assert sorted(counts) == [("neighbour-0", 40), ("neighbour-1", 40)]
    # what valgrind runs: the warm-up and the counted calls on a copy of the store
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--db", str(tmp_path), "--run", "2"],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr


@pytest.mark.parametrize("args", [["--calls", "0"], ["--neighbours", "-1"], ["--size", "9"]])
def test_bad_arguments_are_refused(args: list[str]) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)
    assert done.returncode == 2
    assert "--calls must be >= 1, --size >= 10 and --neighbours >= 0" in done.stderr
