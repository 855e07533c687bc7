"""scripts/append_instructions.py runs the appends it counts (valgrind itself is not needed
here: the counted process is run bare) and refuses bad arguments."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

from support import SCRIPTS, store_file

SCRIPT = SCRIPTS / "append_instructions.py"


def test_the_counted_process_appends_the_warm_up_and_the_given_number(tmp_path: Path) -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--run", "5", "--db", str(tmp_path)],
        capture_output=True,
        text=True,
    )
    assert done.returncode == 0, done.stderr
    with store_file(tmp_path / "a.db") as conn:
        roles = [r for (r,) in conn.execute("SELECT role FROM messages ORDER BY seq")]
    assert len(roles) == 25  # 20 warm-up appends and 5 counted ones
    assert roles[:4] == ["user", "assistant", "user", "assistant"]


def test_bad_arguments_are_refused() -> None:
    done = subprocess.run(
        [sys.executable, str(SCRIPT), "--appends", "0"], capture_output=True, text=True
    )
    assert done.returncode == 2
    assert "--appends must be >= 1" in done.stderr
