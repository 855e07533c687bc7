"""The load benchmark runs a real server on loopback and reports every error."""

from __future__ import annotations

from memstrata.bench import load, names


def test_a_small_load_run_has_no_errors_and_counts_every_request() -> None:
    result = load.run(clients=8, requests=80, users=2, conversations=2, messages=20)
    assert "load" in names()
    assert result["name"] == "load"
    assert result["headline"]["errors"] == 0, result["params"]["first_errors"]
    rows = {r["kind"]: r for r in result["rows"]}
    assert rows["history"]["requests"] + rows["context"]["requests"] == 80
    assert rows["history"]["requests"] == 40
    assert set(result) == {"name", "machine", "params", "headline", "rows", "baselines"}
