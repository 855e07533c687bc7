"""``memstrata bench peers``: the same workloads through memstrata and through the
libraries a user would pick instead, on the same machine in one command.

- Chat history: one linear conversation grows to each size (1k, 10k, 100k messages
  by default), one durable write per message; at each size the newest messages that
  fit 2,000 tokens are read repeatedly. Against LangChain ``SQLChatMessageHistory`` +
  ``trim_messages``, LlamaIndex ``Memory`` (SQL chat store) and LangGraph message
  state on ``SqliteSaver`` (see :mod:`.systems`); memstrata also on a branched tree
  of each size. Every system counts tokens with the same o200k_base counter.
- Recall: LoCoMo evidence retrieval against mem0 OSS with ``infer=False`` and the
  same embedder (see :mod:`.recall`).

Each system runs in its own process (:mod:`.worker`), one after another, so no
system shares an interpreter, a cache or a CPU with another. Runs are repeated and
the median of each figure across runs is reported; the order of systems rotates
between runs so slow drift of the machine falls on everyone. A system that has not
reached a size within the time limit is reported as ``over`` with the size it
reached and how its append cost grew; an uninstalled peer as ``unavailable``.
"""

from __future__ import annotations

import json
import statistics
import subprocess
import sys
import tempfile
from collections.abc import Callable, Mapping, Sequence
from pathlib import Path
from typing import Any

from rich.console import Console

from memstrata.bench.peers.drive import HISTORY_BUDGET_S
from memstrata.bench.report import Column, envelope, fmt, machine_line, print_table
from memstrata.errors import InvalidInput

__all__ = ["DEFAULT_SIZES", "PEERS", "aggregate", "print_result", "run"]

DEFAULT_SIZES = (1_000, 10_000, 100_000)
PEERS = ("langchain", "llamaindex", "langgraph")
RECALL_PEERS = ("mem0",)
RUNS = 3
CALLS = 30
TIME_LIMIT_S = 120.0
MAX_TOKENS = 2000
SEED = 1729
STARTUP_S = 120.0  # imports, text generation and clean-up around the measured work
GOAL_HISTORY_X = 10.0  # issue goal: history at least 10x faster than each peer at 10k
_MEDIAN_KEYS = (
    "append_s",
    "append_per_s",
    "segment_append_per_s",
    "append_ms_first",
    "append_ms_last",
    "append_growth",
    "reached",
    "store_bytes",
    "leaves",
    "history_calls",
    "history_p50_ms",
    "history_p95_ms",
    "mean_messages",
    "mean_tokens",
    "history_p50_ms_at_reached",
    "mean_messages_at_reached",
)

Spawn = Callable[[dict[str, Any], float], list[dict[str, Any]]]


def _spawn(spec: dict[str, Any], timeout_s: float) -> list[dict[str, Any]]:
    """Run one worker; its records, plus a ``killed`` record if it overran ``timeout_s``."""
    with tempfile.TemporaryFile(mode="w+", encoding="utf-8") as err:
        proc = subprocess.Popen(
            [sys.executable, "-m", "memstrata.bench.peers.worker", json.dumps(spec)],
            stdout=subprocess.PIPE,
            stderr=err,
            stdin=subprocess.DEVNULL,
            text=True,
        )
        killed = False
        try:
            out, _ = proc.communicate(timeout=timeout_s)
        except subprocess.TimeoutExpired:
            proc.kill()
            out, _ = proc.communicate()
            killed = True
        records = [json.loads(line) for line in out.splitlines() if line.startswith("{")]
        if killed:
            records.append({"status": "killed", "limit_s": timeout_s})
        elif proc.returncode != 0:
            err.seek(0)
            tail = err.read().strip().splitlines()[-8:]
            records.append({"status": "failed", "reason": "\n".join(tail)})
        return records


def _chat_timeout(sizes: Sequence[int], time_limit_s: float) -> float:
    return time_limit_s + len(sizes) * (HISTORY_BUDGET_S * 2 + 30) + STARTUP_S


def _by_size(records: list[dict[str, Any]], sizes: Sequence[int]) -> dict[int, dict[str, Any]]:
    """One record per size: measured, or why not (over, killed, failed, unavailable)."""
    out: dict[int, dict[str, Any]] = {}
    stop: dict[str, Any] | None = None
    for rec in records:
        if "size" in rec:
            out[rec["size"]] = rec
            if rec["status"] == "over":
                stop = rec
        else:
            stop = rec
    for size in sizes:
        if size not in out:
            if stop is not None and stop["status"] == "over":
                # Larger sizes than the one it stopped at: not reached either.
                out[size] = {**stop, "size": size}
            elif stop is not None:
                out[size] = {"size": size, **stop}
            else:
                out[size] = {"size": size, "status": "failed", "reason": "no result"}
    return out


def aggregate(runs: Sequence[Mapping[int, Mapping[str, Any]]], size: int) -> dict[str, Any]:
    """The median across runs of one system at one size. Measured in every run: "ok".
    Otherwise the worst status seen, with the medians of what those runs measured."""
    recs = [r[size] for r in runs]
    statuses = [r["status"] for r in recs]
    for status in ("unavailable", "failed", "killed", "over"):
        if status in statuses:
            chosen = [r for r in recs if r["status"] == status]
            break
    else:
        status, chosen = "ok", recs
    out: dict[str, Any] = {"size": size, "status": status, "runs": len(recs)}
    for key in ("limit_s", "reason"):
        if key in chosen[0]:
            out[key] = chosen[0][key]
    for key in _MEDIAN_KEYS:
        values = [r[key] for r in chosen if r.get(key) is not None]
        if values:
            out[key] = round(statistics.median(values), 4)
    if status == "ok":
        out["history_p50_ms_runs"] = [r["history_p50_ms"] for r in recs]
    return out


def _ratios(mine: Mapping[str, Any], peer: Mapping[str, Any]) -> dict[str, Any]:
    """memstrata's advantage at one size. A peer stopped short of the size gets a lower
    bound instead: its history at the size it reached against memstrata's at this size
    (a peer whose history cost grows with the conversation would only be slower here)."""
    if mine.get("status") != "ok":
        return {}
    if peer.get("status") == "ok":
        return {
            "history_x": round(peer["history_p50_ms"] / mine["history_p50_ms"], 1),
            "append_x": round(mine["append_per_s"] / peer["append_per_s"], 1),
        }
    if peer.get("status") == "over" and peer.get("history_p50_ms_at_reached"):
        return {
            "history_x_at_least": round(
                peer["history_p50_ms_at_reached"] / mine["history_p50_ms"], 1
            ),
            "append_x_at_least": round(mine["append_per_s"] / peer["append_per_s"], 1),
        }
    return {}


def _check(sizes: Sequence[int] | None, runs: int, calls: int, time_limit_s: float) -> list[int]:
    chosen = list(sizes) if sizes else list(DEFAULT_SIZES)
    for s in chosen:
        if isinstance(s, bool) or not isinstance(s, int) or s < 10 or s % 2:
            raise InvalidInput(
                f"sizes must be even whole numbers of at least 10 (turns are pairs), got {s!r}",
                field="sizes",
            )
    if runs < 1 or calls < 1 or time_limit_s <= 0:
        raise InvalidInput("runs and calls must be >= 1 and the time limit positive", field="runs")
    return sorted(set(chosen))


def run(
    *,
    sizes: Sequence[int] | None = None,
    runs: int = RUNS,
    calls: int = CALLS,
    time_limit_s: float = TIME_LIMIT_S,
    max_tokens: int = MAX_TOKENS,
    seed: int = SEED,
    data: Path | None = None,
    recall: bool = True,
    limit_conversations: int | None = None,
    peers: Sequence[str] = PEERS,
    progress: Callable[[str], None] = lambda _: None,
    spawn: Spawn = _spawn,
) -> dict[str, Any]:
    """Run every system in its own process and return the JSON envelope."""
    from memstrata.bench import locomo

    chosen = _check(sizes, runs, calls, time_limit_s)
    unknown = set(peers) - set(PEERS)
    if unknown:
        raise InvalidInput(f"unknown peers {sorted(unknown)}; known: {list(PEERS)}", field="peers")
    base = {"sizes": chosen, "calls": calls, "max_tokens": max_tokens, "seed": seed}
    systems = ["memstrata", *peers]
    per_run: dict[str, list[dict[int, dict[str, Any]]]] = {s: [] for s in [*systems, "branched"]}
    timeout = _chat_timeout(chosen, time_limit_s)
    for r in range(runs):
        order = systems[r % len(systems) :] + systems[: r % len(systems)]
        for system in [*order, "branched"]:
            progress(f"run {r + 1}/{runs}: {system}")
            task = "branched" if system == "branched" else "chat"
            spec = {"task": task, "system": system, "time_limit_s": time_limit_s, **base}
            per_run[system].append(_by_size(spawn(spec, timeout), chosen))

    def summary(system: str) -> list[dict[str, Any]]:
        return [aggregate(per_run[system], size) for size in chosen]

    linear = summary("memstrata")
    branched = summary("branched")
    baselines: dict[str, Any] = {}
    for peer in peers:
        rows = summary(peer)
        for mine, theirs in zip(linear, rows, strict=True):
            theirs.update(_ratios(mine, theirs))
        baselines[peer] = {"rows": rows}

    recall_out: dict[str, Any] = {}
    embedders: dict[str, Any] = {}
    if recall:
        path = data or locomo.default_data_path()
        for system in ("memstrata", *RECALL_PEERS):
            progress(f"recall: {system} on {path.name}")
            spec = {
                "task": "recall",
                "system": system,
                "data": str(path),
                "limit_conversations": limit_conversations,
            }
            got = spawn(spec, 3600.0)
            recall_out[system] = got[-1] if got else {"status": "failed", "reason": "no result"}
        for peer in RECALL_PEERS:
            baselines[peer] = recall_out[peer]
        embedders = {k: v.get("embedder") for k, v in recall_out.items() if v.get("status") == "ok"}
        if len(set(embedders.values())) > 1:
            raise RuntimeError(f"recall systems embedded differently: {embedders}")

    headline = _headline(chosen, linear, branched, baselines, recall_out)
    for row in linear:
        row["system"] = "memstrata"
    for row in branched:
        row["system"] = "memstrata (branched)"
    return envelope(
        "peers",
        params={
            **base,
            "runs": runs,
            "time_limit_s": time_limit_s,
            "history_budget_s": HISTORY_BUDGET_S,
            "peers": list(peers),
            "recall_peers": list(RECALL_PEERS) if recall else [],
            "data": (data or locomo.default_data_path()).name if recall else None,
            "tokenizer": "o200k_base + 4 per message, one counter for every system",
            "store": "SQLite file per system, default durability of each library",
            "memstrata_settings": "worker off, recall index off (no peer indexes on append)",
            "figures": "median across runs; history p50/p95 within a run",
            "recall_embedders": embedders if recall else {},
        },
        headline=headline,
        rows=[*linear, *branched],
        baselines=baselines,
    )


def _headline(
    sizes: Sequence[int],
    linear: Sequence[Mapping[str, Any]],
    branched: Sequence[Mapping[str, Any]],
    baselines: Mapping[str, Any],
    recall_out: Mapping[str, Any],
) -> dict[str, Any]:
    head: dict[str, Any] = {}
    for mine, tree in zip(linear, branched, strict=True):
        n = mine["size"]
        head[f"history_p50_ms@{n}"] = mine.get("history_p50_ms")
        head[f"append_per_s@{n}"] = mine.get("append_per_s")
        head[f"branched_history_p50_ms@{n}"] = tree.get("history_p50_ms")
    at = 10_000 if 10_000 in sizes else max(sizes)
    speedups: dict[str, Any] = {}
    bounds: dict[str, float] = {}
    for peer, b in baselines.items():
        if "rows" not in b or peer in RECALL_PEERS:
            continue
        row = next(r for r in b["rows"] if r["size"] == at)
        speedups[peer] = row.get("history_x", row["status"])
        if "history_x_at_least" in row:
            bounds[peer] = row["history_x_at_least"]
    head[f"history_x@{at}"] = speedups
    head[f"history_x_at_least@{at}"] = bounds
    measured = [v for v in speedups.values() if isinstance(v, float)]
    # Met when every peer is measured at least GOAL times slower, or could not reach the
    # size and was already that much slower at the size it reached.
    known = [v if isinstance(v, float) else bounds.get(p) for p, v in speedups.items()]
    head[f"goal_history_{GOAL_HISTORY_X:g}x@{at}"] = (
        all(v is not None and v >= GOAL_HISTORY_X for v in known) if speedups else None
    )
    head[f"min_history_x@{at}"] = min(measured) if measured else None
    mine = recall_out.get("memstrata", {})
    if mine.get("status") == "ok":
        head["recall"] = mine["headline"]
    elif mine:
        raise RuntimeError(f"memstrata recall did not run: {mine}")
    for system, got in recall_out.items():
        h = got.get("headline", {})
        head[f"{system}_turn_recall@10"] = h.get("turn_recall@10")
        head[f"{system}_search_p95_ms"] = h.get("search_p95_ms")
    return head


def _cell(row: Mapping[str, Any]) -> dict[str, Any]:
    """A table row: figures when measured, the status otherwise (the why goes in a note)."""
    out = dict(row)
    status = row["status"]
    if status == "over":
        out["history_p50_ms"] = f"over {row['limit_s']:g} s"
        out["append_per_s"] = None
        for key in ("history_x", "append_x"):
            if row.get(f"{key}_at_least") is not None:
                out[key] = f">= {fmt(row[f'{key}_at_least'])}"
    elif status != "ok":
        out["history_p50_ms"] = status
    if row.get("store_bytes") is not None:
        out["store_mb"] = round(row["store_bytes"] / 1e6, 1)
    return out


def _note(system: str, row: Mapping[str, Any]) -> str | None:
    """Why a system has no figures at a size: how far it got, or what stopped it."""
    where = f"{system} at {row['size']:,}"
    if row["status"] == "over":
        return (
            f"{where}: not reached in {row['limit_s']:g} s of appends; it reached "
            f"{fmt(row.get('reached'))} messages at {fmt(row.get('append_per_s'))}/s, one "
            f"append growing from {fmt(row.get('append_ms_first'))} to "
            f"{fmt(row.get('append_ms_last'))} ms (x{fmt(row.get('append_growth'))}); "
            f"history there: {fmt(row.get('history_p50_ms_at_reached'))} ms p50"
        )
    if row["status"] != "ok":
        return f"{where}: {row['status']} {row.get('reason') or ''}".rstrip()
    return None


_CHAT_COLUMNS: list[Column] = [
    ("system", "system"),
    ("size", "messages"),
    ("append_per_s", "append/s"),
    ("history_p50_ms", "history p50 ms"),
    ("history_p95_ms", "p95 ms"),
    ("mean_messages", "msgs"),
    ("mean_tokens", "tokens"),
    ("store_mb", "store MB"),
    ("history_x", "memstrata faster (history)"),
    ("append_x", "(append)"),
]
_RECALL_COLUMNS: list[Column] = [
    ("system", "system"),
    ("turn_recall@1", "R@1"),
    ("turn_recall@5", "R@5"),
    ("turn_recall@10", "R@10"),
    ("turn_recall@50", "R@50"),
    ("ndcg@10", "nDCG@10"),
    ("search_p50_ms", "search p50 ms"),
    ("search_p95_ms", "p95 ms"),
    ("ingest_turns_per_s", "ingest turns/s"),
]


def print_result(result: Mapping[str, Any], console: Console) -> None:
    params = result["params"]
    measured = list(result["rows"])
    recall_rows: list[dict[str, Any]] = []
    for peer, b in result["baselines"].items():
        if "rows" in b and peer not in RECALL_PEERS:
            measured += [{**r, "system": peer} for r in b["rows"]]
    measured.sort(key=lambda r: (r["size"], not r["system"].startswith("memstrata"), r["system"]))
    rows = [_cell(r) for r in measured]
    notes = [n for r in measured if (n := _note(r["system"], r)) is not None]
    print_table(
        f"Append + {params['max_tokens']:,}-token history of one growing conversation "
        f"(median of {params['runs']} runs; time limit {params['time_limit_s']:g} s of appends)",
        _CHAT_COLUMNS,
        rows,
        notes=notes,
        console=console,
    )
    h = result["headline"]
    if h.get("recall"):
        recall_rows.append({"system": "memstrata", **h["recall"]})
    for peer in RECALL_PEERS:
        got = result["baselines"].get(peer)
        if got is None:
            continue
        if got.get("status") == "ok":
            recall_rows.append({"system": peer, **got["headline"]})
        else:
            recall_rows.append({"system": f"{peer}: {got.get('status')} {got.get('reason', '')}"})
    if recall_rows:
        print_table(
            f"LoCoMo evidence retrieval, categories 1-4 ({params.get('data')}), same embedder",
            _RECALL_COLUMNS,
            recall_rows,
            console=console,
        )
    console.print(machine_line(result["machine"]), highlight=False)
