"""``memstrata bench recall-natural`` on a small set built here: the JSON envelope, the
two passes, scoring that can fail, and clear errors for a bad file."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memstrata.bench import recall_natural as rn
from memstrata.cli import app
from memstrata.errors import InvalidInput

DATA = {
    "about": "a small set for the tests",
    "memories": [
        ["My dog Juniper is a border collie.", "I was raised on a farm outside Cork."],
        ["I play the cello in an orchestra.", "My manager is Priya."],
    ],
    "related": [
        {"q": "What breed is my dog?", "a": "border collie"},
        {"q": "Where did I spend my childhood?", "a": ["cork", "galway"]},
        {"q": "Which instrument do I play?", "a": "cello"},
    ],
    "unrelated": ["Who wrote the Odyssey?", "What is the boiling point of water at sea level?"],
}


def _write(tmp_path: Path, data: object) -> Path:
    path = tmp_path / "natural.json"
    path.write_text(json.dumps(data), encoding="utf-8")
    return path


def test_score_needs_the_answer_outside_the_question() -> None:
    q = "Where does the border collie come from?"
    assert not rn.score_related([{"content": q}], q, ["border collie"])
    assert rn.score_related(
        [{"content": "<recalled>My dog is a Border Collie</recalled>"}, {"content": q}],
        q,
        ["border collie"],
    )
    assert rn.score_related([{"content": "galway"}, {"content": q}], q, ["cork", "galway"])


def test_the_benchmark_runs_both_passes(tmp_path: Path) -> None:
    result = rn.run(data=_write(tmp_path, DATA))
    assert result["name"] == "recall-natural"
    assert set(result) >= {"name", "machine", "params", "headline", "rows", "baselines"}
    first, second = result["rows"]
    assert first["pass"] == "settle 0 s"
    assert second["pass"] == "after jobs"
    for row in (first, second):
        assert row["related"] == 3
        assert row["unrelated"] == 2
        assert row["pending_max"] == 0  # read-your-writes: nothing waits at the first read
    # Asked right after ingest, the user's own statements come back.
    assert result["headline"]["related_hits@settle"] == 1.0
    assert result["headline"]["unrelated_recalled_tokens@settle"] == 0.0
    assert result["params"]["memories"] == 4


def test_the_cli_writes_the_envelope(tmp_path: Path) -> None:
    out = tmp_path / "out.json"
    runner = CliRunner()
    args = ["bench", "recall-natural", "--data", str(_write(tmp_path, DATA)), "--out", str(out)]
    result = runner.invoke(app, [*args, "--settle", "0"])
    assert result.exit_code == 0, result.output
    assert json.loads(out.read_text())["params"]["settle_s"] == 0.0
    missing = runner.invoke(app, ["bench", "recall-natural"])
    assert missing.exit_code != 0
    assert "--data" in missing.output


@pytest.mark.parametrize(
    "data",
    [
        [],
        {"memories": []},
        {"memories": [["ok"]], "related": [{"q": "x"}]},
        {"memories": [["ok"]], "related": [{"q": "x", "a": 3}]},
        {"memories": [["ok"]]},
        {"memories": [[""]], "unrelated": ["x"]},
    ],
)
def test_a_bad_file_is_a_clear_error(tmp_path: Path, data: object) -> None:
    with pytest.raises(InvalidInput):
        rn.load(_write(tmp_path, data))


SETS = Path(__file__).resolve().parents[2] / "bench-data" / "recall-natural"


@pytest.mark.parametrize(
    "name", ["personal", "work", "mixed", "logistics", "retired", "ops", "student"]
)
def test_the_committed_sets_are_well_formed(name: str) -> None:
    """The sets docs/benchmarks.md runs load, and each answer is in exactly one statement
    and in no question (a set that broke this would score a hit for the wrong reason)."""
    data = rn.load(SETS / f"{name}.json")
    statements = [s.lower() for conversation in data.memories for s in conversation]
    assert data.related
    assert data.unrelated
    for question, answers in data.related:
        for answer in answers:
            assert sum(answer in s for s in statements) == 1, (question, answer)
            assert answer not in question.lower(), question
