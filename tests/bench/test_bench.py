"""The benchmark runner at tiny sizes: JSON shape, tree shape, sane numbers (never timings)."""

from __future__ import annotations

import json
import random
from pathlib import Path
from typing import Any

import pytest

from memstrata import Memory
from memstrata.bench import names, run_bench
from memstrata.bench.history import TextGenerator
from memstrata.bench.report import percentile
from memstrata.errors import InvalidInput

ROW_NUMBERS = (
    "append_s",
    "append_per_s",
    "append_p50_ms",
    "append_p99_ms",
    "history_p50_ms",
    "history_p95_ms",
    "history_p99_ms",
    "history_mean_ms",
    "mean_messages",
    "mean_tokens",
    "mean_rows_read",
    "max_rows_read",
    "store_bytes",
)


@pytest.fixture(scope="module")
def small(tmp_path_factory: pytest.TempPathFactory) -> tuple[dict[str, Any], Path]:
    out = tmp_path_factory.mktemp("bench") / "nested" / "history.json"
    return run_bench("history", out=out, sizes=[200, 1000]), out


def test_history_writes_the_envelope(small: tuple[dict[str, Any], Path]) -> None:
    result, out = small
    assert json.loads(out.read_text()) == result
    assert set(result) == {"name", "machine", "params", "headline", "rows", "baselines"}
    assert result["name"] == "history"
    assert result["baselines"] == {}
    assert result["params"]["sizes"] == [200, 1000]
    assert result["params"]["max_tokens"] == 2000
    machine = result["machine"]
    assert machine["cpu_count"] >= 1
    assert machine["python"].count(".") == 2
    assert machine["sqlite"]
    assert machine["memstrata"]


def test_history_rows_are_branched_trees_with_positive_numbers(
    small: tuple[dict[str, Any], Path],
) -> None:
    result, _ = small
    rows = result["rows"]
    assert [r["size"] for r in rows] == [200, 1000]
    for row in rows:
        assert row["messages"] == row["size"]
        assert row["history_calls"] == result["params"]["calls"]
        for key in ROW_NUMBERS:
            assert row[key] > 0, key
        # Every regeneration and every edit leaves exactly one abandoned leaf behind.
        assert row["regenerations"] > 0
        assert row["edits"] > 0
        assert row["leaves"] == 1 + row["regenerations"] + row["edits"]
        assert row["max_depth"] < row["messages"]
        # History reads at least what it returns, and about as much (never the branch).
        assert row["mean_messages"] <= row["mean_rows_read"] < 4 * row["mean_messages"]
        assert row["max_rows_read"] < row["max_depth"]
        assert row["mean_tokens"] <= result["params"]["max_tokens"]
        assert row["history_p50_ms"] <= row["history_p95_ms"] <= row["history_p99_ms"]


def test_history_headline(small: tuple[dict[str, Any], Path]) -> None:
    result, _ = small
    h = result["headline"]
    rows = {r["size"]: r for r in result["rows"]}
    assert h["append_per_s"] == rows[1000]["append_per_s"]
    assert h["history_p50_ms"] == {
        "200": rows[200]["history_p50_ms"],
        "1000": rows[1000]["history_p50_ms"],
    }
    ratio = rows[1000]["history_p50_ms"] / rows[200]["history_p50_ms"]
    assert h["p50_ratio_largest_vs_smallest"] == pytest.approx(ratio, abs=1e-3)
    assert h["p50_within_2x"] is (ratio <= 2)


def test_history_prints_a_table(tmp_path: Path, capsys: pytest.CaptureFixture[str]) -> None:
    run_bench("history", db=f"sqlite:///{(tmp_path / 'db.sqlite').as_posix()}", sizes=[20])
    printed = capsys.readouterr().out
    assert "memstrata bench history" in printed
    assert "p50" in printed


def test_history_on_a_given_database_reruns_without_collision(tmp_path: Path) -> None:
    url = f"sqlite:///{(tmp_path / 'shared.db').as_posix()}"
    first = run_bench("history", db=url, sizes=[60])
    second = run_bench("history", db=url, sizes=[60])
    assert first["params"]["db"] == url
    assert first["params"]["db_kind"] == "sqlite"
    # Same seed, fresh tenant: the same tree both times, not one grown on top of the other.
    shape = ("messages", "leaves", "regenerations", "edits", "max_depth")
    assert [first["rows"][0][k] for k in shape] == [second["rows"][0][k] for k in shape]
    tenants = {first["params"]["tenant"], second["params"]["tenant"]}
    assert len(tenants) == 2
    # The benchmark's users are removed afterwards: someone else's database is left as found.
    with Memory.open(url) as mem:
        for tenant in tenants:
            assert mem.users.list(tenant).items == []


def test_unknown_benchmark_lists_the_known_ones() -> None:
    with pytest.raises(InvalidInput) as info:
        run_bench("nope")
    assert "history" in str(info.value)
    assert info.value.detail["known"] == names()
    assert "history" in names()


@pytest.mark.parametrize("sizes", [[], [0], [5], [10.5], [True]])
def test_history_rejects_bad_sizes(sizes: list[Any]) -> None:
    with pytest.raises(InvalidInput):
        run_bench("history", sizes=sizes)


def test_text_generator_is_deterministic_and_sized() -> None:
    first = TextGenerator(random.Random(7))
    second = TextGenerator(random.Random(7))
    texts = [first.message() for _ in range(200)]
    assert texts == [second.message() for _ in range(200)]
    assert len(set(texts)) == len(texts)
    for text in texts:
        assert 30 <= len(text.split()) <= 60
        assert text[0].isupper()
        assert text[-1] in ".?!"


def test_percentile_interpolates() -> None:
    assert percentile([3.0, 1.0, 2.0], 50) == 2.0
    assert percentile([1.0, 2.0], 50) == 1.5
    assert percentile([1.0, 2.0, 3.0, 4.0, 5.0], 100) == 5.0
    assert percentile([4.0], 95) == 4.0
    with pytest.raises(ValueError, match="no values"):
        percentile([], 50)
