"""``memstrata bench peers``: the workload driver, the aggregation across runs, and one
small real run of every peer (LangChain, LlamaIndex, LangGraph, mem0) in its own process.
Timings are reported by the benchmark, never asserted here."""

from __future__ import annotations

import json
from pathlib import Path
from typing import Any

import pytest

from memstrata.bench import peers
from memstrata.bench.peers import drive as drive_mod
from memstrata.bench.peers import worker
from memstrata.errors import InvalidInput


class _Chat:
    """A chat memory whose appends cost ``cost(n)`` fake nanoseconds at n stored messages."""

    def __init__(self, clock: list[int], cost: Any) -> None:
        self.clock = clock
        self.cost = cost
        self.stored: list[str] = []

    def append_turn(self, user: str, assistant: str) -> None:
        self.clock[0] += self.cost(len(self.stored))
        self.stored += [user, assistant]

    def history(self, max_tokens: int) -> list[str]:
        self.clock[0] += 1_000
        out: list[str] = []
        for text in reversed(self.stored):
            if len(out) * 10 + 10 > max_tokens:
                break
            out.append(text)
        return out[::-1]

    def store_bytes(self) -> int:
        return 100 * len(self.stored)


def _drive(chat: _Chat, clock: list[int], sizes: list[int], limit_s: float) -> list[dict[str, Any]]:
    out: list[dict[str, Any]] = []
    drive_mod.drive(
        chat,
        [f"m{i}" for i in range(max(sizes))],
        sizes,
        max_tokens=50,
        calls=4,
        time_limit_s=limit_s,
        count=lambda _: 10,
        emit=out.append,
        clock=lambda: clock[0],
    )
    return out


def test_drive_measures_every_size_of_one_growing_conversation() -> None:
    clock = [0]
    chat = _Chat(clock, lambda n: 2_000_000)  # 1 ms per message
    out = _drive(chat, clock, [100, 20], limit_s=60)
    assert [r["size"] for r in out] == [20, 100]
    assert all(r["status"] == "ok" for r in out)
    assert len(chat.stored) == 100  # grown once, not rebuilt per size
    assert out[1]["append_per_s"] == pytest.approx(1000)
    assert out[1]["history_calls"] == 4
    assert out[1]["mean_messages"] == 5
    assert out[1]["mean_tokens"] == 50


def test_drive_stops_a_slow_system_at_the_limit_and_reports_its_growth() -> None:
    clock = [0]
    chat = _Chat(clock, lambda n: 1_000_000 * (1 + n // 100))  # cost grows with size
    out = _drive(chat, clock, [200, 2_000, 20_000], limit_s=1.0)
    assert out[0]["status"] == "ok"
    [over] = out[1:]
    assert over["status"] == "over"
    assert over["size"] == 2_000
    assert 200 < over["reached"] < 2_000
    assert over["append_ms_last"] > over["append_ms_first"]
    assert over["append_growth"] > 1
    assert over["history_p50_ms_at_reached"] > 0


def test_by_size_marks_sizes_after_a_stop_as_not_reached() -> None:
    over = {"size": 1_000, "status": "over", "limit_s": 5, "reached": 600}
    got = peers._by_size([{"size": 100, "status": "ok"}, over], [100, 1_000, 10_000])
    assert got[100]["status"] == "ok"
    assert got[10_000]["status"] == "over"
    assert got[10_000]["reached"] == 600
    killed = peers._by_size([{"status": "killed", "limit_s": 9}], [100])
    assert killed[100]["status"] == "killed"
    failed = peers._by_size([], [100])
    assert failed[100]["status"] == "failed"


def test_aggregate_takes_medians_and_the_worst_status() -> None:
    def rec(p50: float, status: str = "ok") -> dict[int, dict[str, Any]]:
        return {10: {"size": 10, "status": status, "history_p50_ms": p50, "append_per_s": p50}}

    ok = peers.aggregate([rec(1.0), rec(9.0), rec(2.0)], 10)
    assert ok["status"] == "ok"
    assert ok["history_p50_ms"] == 2.0
    assert ok["history_p50_ms_runs"] == [1.0, 9.0, 2.0]
    mixed = peers.aggregate([rec(1.0), rec(5.0, "over")], 10)
    assert mixed["status"] == "over"
    assert mixed["history_p50_ms"] == 5.0  # figures of the runs that stopped, not the rest


def test_bad_sizes_and_options_are_refused() -> None:
    with pytest.raises(InvalidInput):
        peers.run(sizes=[15])
    with pytest.raises(InvalidInput):
        peers.run(sizes=[20], runs=0)
    with pytest.raises(InvalidInput):
        peers.run(sizes=[20], peers=["autogen"])


def test_an_uninstalled_peer_is_reported_not_dropped(
    monkeypatch: pytest.MonkeyPatch, capsys: pytest.CaptureFixture[str]
) -> None:
    def missing(spec: dict[str, Any], home: Path) -> None:
        raise ImportError("No module named 'langchain_community'")

    monkeypatch.setitem(worker.TASKS, "chat", missing)
    assert worker.main([json.dumps({"task": "chat", "system": "langchain"})]) == 0
    [line] = capsys.readouterr().out.splitlines()
    got = json.loads(line)
    assert got["status"] == "unavailable"
    assert "memstrata[peers]" in got["reason"]


def _tiny_locomo(path: Path) -> Path:
    key = "session_1_" + "date_time"
    turns = [
        ("Ann", "I adopted a grey cat called Pixel last week"),
        ("Bo", "Lovely, I started learning the violin in spring"),
        ("Ann", "My sister moved to Lisbon for a new job"),
        ("Bo", "We went hiking in the Alps during the holidays"),
    ]
    sample = {
        "sample_id": "tiny",
        "conversation": {
            "speaker_a": "Ann",
            "speaker_b": "Bo",
            key: "10:00 am on 1 June, 2023",
            "session_1": [
                {"speaker": s, "dia_id": f"D1:{i}", "text": t}
                for i, (s, t) in enumerate(turns, start=1)
            ],
        },
        "qa": [
            {"question": "What is the name of Ann's cat?", "evidence": ["D1:1"], "category": 4},
            {"question": "Which instrument is Bo learning?", "evidence": ["D1:2"], "category": 4},
            {"question": "Where did Ann's sister move?", "evidence": ["D1:3"], "category": 1},
        ],
    }
    path.write_text(json.dumps([sample]), encoding="utf-8")
    return path


@pytest.mark.slow
def test_a_small_run_measures_every_peer_in_its_own_process(tmp_path: Path) -> None:
    data = _tiny_locomo(tmp_path / "tiny.json")
    result = peers.run(sizes=[20, 40], runs=1, calls=3, time_limit_s=300, data=data)
    assert set(result) == {"name", "machine", "params", "headline", "rows", "baselines"}
    rows = {(r["system"], r["size"]): r for r in result["rows"]}
    assert rows[("memstrata", 40)]["status"] == "ok"
    assert rows[("memstrata (branched)", 40)]["status"] == "ok"
    base = result["baselines"]
    assert set(base) == {"langchain", "llamaindex", "langgraph", "mem0"}
    for peer in ("langchain", "llamaindex", "langgraph"):
        for row in base[peer]["rows"]:
            assert row["status"] == "ok", (peer, row)
            assert row["history_x"] > 0
            assert row["append_x"] > 0
    # Same texts, same counter, same budget: the budgeted histories hold the same messages
    # (LlamaIndex counts text tokens only, without the per-message 4, so it may hold more).
    mine = rows[("memstrata", 40)]["mean_messages"]
    assert base["langchain"]["rows"][1]["mean_messages"] == mine
    assert base["langgraph"]["rows"][1]["mean_messages"] == mine
    assert base["llamaindex"]["rows"][1]["mean_messages"] >= mine
    mem0 = base["mem0"]
    assert mem0["status"] == "ok", mem0
    assert mem0["questions"] == 3
    head = result["headline"]
    embedders = result["params"]["recall_embedders"]
    assert embedders["mem0"] == embedders["memstrata"]
    assert embedders["mem0"].startswith("all-minilm-l6-v2")
    assert 0 <= head["mem0_turn_recall@10"] <= 1
    assert head["recall"]["turn_recall@10"] == head["memstrata_turn_recall@10"]
    assert set(head["history_x@40"]) == {"langchain", "llamaindex", "langgraph"}


def test_the_table_names_why_a_peer_has_no_figures() -> None:
    from io import StringIO

    from rich.console import Console

    mine = {"size": 1_000, "status": "ok", "history_p50_ms": 0.5, "append_per_s": 4000.0}
    over = {
        "size": 1_000,
        "status": "over",
        "limit_s": 20.0,
        "reached": 612,
        "append_per_s": 61.2,
        "append_ms_first": 5.0,
        "append_ms_last": 25.0,
        "append_growth": 5.0,
        "history_p50_ms_at_reached": 16.0,
    }
    result = {
        "params": {"max_tokens": 2000, "runs": 3, "time_limit_s": 20.0, "data": None},
        "headline": {},
        "rows": [{**mine, "system": "memstrata"}],
        "baselines": {"langgraph": {"rows": [over]}, "langchain": {"rows": [dict(mine)]}},
        "machine": {"cpu_count": 2},
    }
    buf = StringIO()
    peers.print_result(result, Console(file=buf, width=200))
    text = buf.getvalue()
    assert "over 20 s" in text
    assert "langgraph at 1,000: not reached in 20 s of appends; it reached 612 messages" in text
    assert "at 61.2/s" in text
    assert "langchain at" not in text  # measured: no note


def test_a_peer_stopped_short_gets_a_lower_bound_and_counts_for_the_goal() -> None:
    mine = {"size": 10_000, "status": "ok", "history_p50_ms": 0.5, "append_per_s": 5000.0}
    measured = {"size": 10_000, "status": "ok", "history_p50_ms": 6.0, "append_per_s": 100.0}
    over = {
        "size": 10_000,
        "status": "over",
        "history_p50_ms_at_reached": 40.0,
        "append_per_s": 20.0,
    }
    assert peers._ratios(mine, measured) == {"history_x": 12.0, "append_x": 50.0}
    assert peers._ratios(mine, over) == {"history_x_at_least": 80.0, "append_x_at_least": 250.0}
    assert peers._ratios(mine, {"size": 10_000, "status": "failed"}) == {}
    assert peers._ratios({"size": 10_000, "status": "failed"}, measured) == {}

    def goal(*rows: dict[str, Any]) -> Any:
        baselines = {}
        for i, row in enumerate(rows):
            row = {**row, **peers._ratios(mine, row)}
            baselines[f"p{i}"] = {"rows": [row]}
        head = peers._headline([10_000], [mine], [mine], baselines, {})
        return head["goal_history_10x@10000"]

    assert goal(measured, over) is True
    assert goal(measured, {**over, "history_p50_ms_at_reached": 2.0}) is False  # bound 4x
    assert goal({**measured, "history_p50_ms": 4.0}) is False
    assert goal({"size": 10_000, "status": "failed"}) is False  # unmeasured: not met
