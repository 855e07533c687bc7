"""Shared by the agent-framework adapter tests: run an example script for real."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"


def run_example(name: str, cwd: Path, **env: str) -> str:
    """Run ``examples/<name>`` in a fresh interpreter offline and return what it printed."""
    src = str(Path(__file__).resolve().parents[2] / "src")
    full = {
        **os.environ,
        "PYTHONPATH": os.pathsep.join([src, os.environ.get("PYTHONPATH", "")]),
        "MEMSTRATA_EMBEDDER": "none",
        "HF_HUB_OFFLINE": "1",
        "OTEL_SDK_DISABLED": "true",
        **env,
    }
    for key in ("OPENAI_API_KEY", "GOOGLE_API_KEY", "GEMINI_API_KEY"):
        full.pop(key, None)
    done = subprocess.run(
        [sys.executable, str(EXAMPLES / name)],
        env=full,
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=180,
        check=False,
    )
    assert done.returncode == 0, done.stderr[-4000:]
    return done.stdout
