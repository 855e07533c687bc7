"""bench serve drives a real server with wrk and reads the server's CPU from /proc."""

from __future__ import annotations

import shutil
import subprocess

import pytest

from memstrata.bench import names, serve
from memstrata.bench.serverproc import cpu_seconds


def test_cpu_seconds_counts_a_busy_child_process() -> None:
    child = subprocess.Popen(["python3", "-c", "sum(i * i for i in range(3_000_000))"])
    child.wait()
    # A finished child is gone from /proc; a running one is found under its parent.
    sleeper = subprocess.Popen(
        ["python3", "-c", "import time; sum(range(2_000_000)); time.sleep(5)"]
    )
    try:
        deadline = 0
        while deadline < 50:
            spent = cpu_seconds(sleeper.pid)
            if spent.get(sleeper.pid, 0) > 0:
                break
            deadline += 1
            subprocess.run(["sleep", "0.1"], check=True)
        assert sleeper.pid in spent
        assert spent[sleeper.pid] > 0
    finally:
        sleeper.kill()
        sleeper.wait()


@pytest.mark.skipif(shutil.which("wrk") is None, reason="wrk is not installed (make installs it)")
def test_a_short_serve_run_reports_every_operation_with_cpu_and_no_errors() -> None:
    result = serve.run(users=1, conversations=1, messages=20, seconds=1, connections=4, calls=5)
    assert "serve" in names()
    assert set(result) == {"name", "machine", "params", "headline", "rows", "baselines"}
    rows = {r["operation"]: r for r in result["rows"]}
    assert set(rows) == set(serve.OPERATIONS)
    assert result["headline"]["errors"] == 0
    for row in rows.values():
        assert row["requests"] > 0
        assert row["server_cpu_ms"] > 0
        assert row["in_process_cpu_ms"] > 0
        assert row["ratio"] == pytest.approx(
            row["server_cpu_ms"] / row["in_process_cpu_ms"], rel=0.05
        )
        assert row["in_process_paused_cpu_ms"] > 0
        assert row["ratio_paused"] == pytest.approx(
            row["server_cpu_ms"] / row["in_process_paused_cpu_ms"], rel=0.05
        )
    assert result["params"]["rounds"] == serve.ROUNDS
    # The floor every row stands on: an empty request to the same server, driven alike.
    assert result["headline"]["healthz_requests_per_s"] > 0
    assert 0 < result["headline"]["healthz_server_cpu_ms"] < rows["context"]["server_cpu_ms"]


def test_rounds_combine_into_one_result() -> None:
    rounds = [
        {"requests": 10, "duration_us": 1_000, "status_errors": 0, "socket_errors": 1,
         "p50_us": 300, "p99_us": 900},
        {"requests": 20, "duration_us": 2_000, "status_errors": 2, "socket_errors": 0,
         "p50_us": 100, "p99_us": 500},
        {"requests": 30, "duration_us": 3_000, "status_errors": 0, "socket_errors": 0,
         "p50_us": 200, "p99_us": 700},
    ]  # fmt: skip
    assert serve._combined(rounds) == {
        "requests": 60,
        "duration_us": 6_000,
        "status_errors": 2,
        "socket_errors": 1,
        "p50_us": 200,
        "p99_us": 900,
    }
