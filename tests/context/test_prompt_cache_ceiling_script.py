"""scripts/prompt_cache_ceiling.py: the prompt-cache replay with the low-water mark and the
per-turn room set by the caller, and its arguments checked."""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path
from types import ModuleType
from typing import Any

import pytest

from memstrata.bench import prompt_cache
from support import load_script

SCRIPT = Path(__file__).resolve().parents[2] / "scripts" / "prompt_cache_ceiling.py"


def _load() -> ModuleType:
    return load_script("prompt_cache_ceiling")


def _row(low_water: float, room: float) -> dict[str, Any]:
    result = prompt_cache.run(
        budgets=(600,), layouts=("cache",), low_water=low_water, volatile_room=room
    )
    assert result["params"]["low_water"] == low_water
    assert result["params"]["volatile_room"] == room
    (row,) = result["rows"]
    return row


def test_a_lower_low_water_mark_steps_less_often(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(prompt_cache, "TURNS", 24)
    monkeypatch.setattr(prompt_cache, "CONVERSATIONS", 1)
    often, seldom = _row(0.9, 0.0), _row(0.1, 0.0)
    assert often["event_share_of_turns"] > seldom["event_share_of_turns"] > 0
    # less history kept at each step: shorter prompts on average
    assert seldom["mean_prompt_tokens"] < often["mean_prompt_tokens"]


def test_the_script_prints_one_row_per_cell(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    monkeypatch.setattr(prompt_cache, "TURNS", 6)
    monkeypatch.setattr(prompt_cache, "CONVERSATIONS", 1)
    assert _load().main(["--budget", "600", "--low-water", "0.5", "0.2", "--room", "0"]) == 0
    lines = capsys.readouterr().out.strip().splitlines()
    assert len(lines) == 3  # the header and two cells
    assert [line.split("|")[0].strip() for line in lines[1:]] == ["0.50", "0.20"]


@pytest.mark.parametrize(
    "args",
    [["--low-water", "1"], ["--low-water", "0"], ["--room", "1"], ["--budget", "0"]],
)
def test_bad_arguments_are_refused(args: list[str]) -> None:
    done = subprocess.run([sys.executable, str(SCRIPT), *args], capture_output=True, text=True)
    assert done.returncode == 2
    assert "error" in done.stderr
