"""The LangGraph and LangChain examples run as they stand (offline, fake models), and
docs/integrations.md shows each of them, unchanged."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[2]
DOC = ROOT / "docs" / "integrations.md"


def _run(example: str, cwd: Path) -> str:
    done = subprocess.run(
        [sys.executable, str(ROOT / "examples" / example)],
        env={**os.environ, "MEMSTRATA_WORKER": "off"},
        cwd=cwd,
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_the_langgraph_example_resumes_forks_and_finds_by_meaning(tmp_path: Path) -> None:
    out = _run("langgraph_memory.py", tmp_path).splitlines()
    assert out[0] == (
        "resumed: ['Hi, my name is Ada.', 'Nice to meet you, Ada.', 'What is my name?', "
        "'You told me your name is Ada.']"
    )
    assert sorted(line for line in out if line.startswith("branch:")) == [
        "branch: Hi, my name is Ada. | Nice to meet you, Ada. | What is my name? | "
        "You told me your name is Ada.",
        "branch: Hi, my name is Ada. | Nice to meet you, Ada. | What is two plus two? | "
        "Two plus two is four.",
    ]
    assert out[-1] == "note: Hi, my name is Ada."


def test_the_langchain_example_keeps_both_sessions(tmp_path: Path) -> None:
    out = _run("langchain_history.py", tmp_path).splitlines()
    assert out[0] == "agent: Your name is Ada."
    assert out[1] == (
        "history: ['I like tea.', 'Noted: you like tea.', 'What do I like?', 'You like tea.']"
    )
    assert sorted(out[2:]) == [
        "conversation: Hi, I am Ada. | Hello Ada! | Who am I? | Your name is Ada.",
        "conversation: I like tea. | Noted: you like tea. | What do I like? | You like tea.",
    ]


@pytest.mark.parametrize("example", ["langgraph_memory.py", "langchain_history.py"])
def test_the_docs_show_the_example_unchanged(example: str) -> None:
    source = (ROOT / "examples" / example).read_text()
    body = source[re.match(r'""".*?"""\n\n', source, re.S).end() :]  # type: ignore[union-attr]
    blocks = re.findall(r"^```python\n(.*?)^```$", DOC.read_text(), re.S | re.M)
    assert body in blocks
