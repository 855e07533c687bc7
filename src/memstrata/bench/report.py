"""What every benchmark shares: the machine line, the JSON envelope, tables, percentiles.

The envelope is the contract of DESIGN.md "Benchmark output"::

    {"name", "machine", "params", "headline", "rows", "baselines"}

``baselines`` is always present (empty when no peer was measured), so a reader
never has to tell "not measured" from "missing key".
"""

from __future__ import annotations

import json
import os
import platform
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from pathlib import Path
from typing import Any

import apsw
from rich import box
from rich.console import Console
from rich.table import Table

__all__ = [
    "Column",
    "envelope",
    "fmt",
    "machine_info",
    "machine_line",
    "ms",
    "percentile",
    "print_table",
    "write_json",
]

Column = tuple[str, str]  # (key in the row dict, header)


def _cpu_model() -> str | None:
    try:
        text = Path("/proc/cpuinfo").read_text(encoding="utf-8", errors="replace")
    except OSError:
        return platform.processor() or None
    for line in text.splitlines():
        key, _, value = line.partition(":")
        # x86 says "model name"; some ARM kernels only give "Model" or "Hardware".
        if key.strip() in ("model name", "Model", "Hardware") and value.strip():
            return value.strip()
    return platform.processor() or None


def _memory_gb() -> float | None:
    try:
        text = Path("/proc/meminfo").read_text(encoding="utf-8")
    except OSError:
        return None
    for line in text.splitlines():
        if line.startswith("MemTotal:"):
            return round(int(line.split()[1]) / 1024 / 1024, 1)
    return None


def machine_info() -> dict[str, Any]:
    """Where and when a benchmark ran, so numbers are never quoted without their machine."""
    from memstrata import __version__

    return {
        "cpu_count": os.cpu_count(),
        "cpu_model": _cpu_model(),
        "memory_gb": _memory_gb(),
        "python": platform.python_version(),
        "python_implementation": platform.python_implementation(),
        "platform": platform.platform(),
        "memstrata": __version__,
        "sqlite": apsw.sqlite_lib_version(),
        "run_at": datetime.now(UTC).replace(microsecond=0).isoformat(),
    }


def machine_line(machine: Mapping[str, Any]) -> str:
    """One human line: CPU, cores, memory, Python, SQLite, memstrata."""
    parts = [
        f"{machine.get('cpu_model') or 'unknown CPU'} x{machine.get('cpu_count')}",
        f"{machine['memory_gb']} GB" if machine.get("memory_gb") else None,
        f"Python {machine.get('python')}",
        f"SQLite {machine.get('sqlite')}",
        f"memstrata {machine.get('memstrata')}",
        str(machine.get("platform") or ""),
    ]
    return " · ".join(p for p in parts if p)


def envelope(
    name: str,
    *,
    params: Mapping[str, Any],
    headline: Mapping[str, Any],
    rows: Sequence[Mapping[str, Any]],
    baselines: Mapping[str, Any] | None = None,
    machine: Mapping[str, Any] | None = None,
) -> dict[str, Any]:
    return {
        "name": name,
        "machine": dict(machine if machine is not None else machine_info()),
        "params": dict(params),
        "headline": dict(headline),
        "rows": [dict(r) for r in rows],
        "baselines": dict(baselines or {}),
    }


def write_json(path: Path, data: Mapping[str, Any]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text(json.dumps(data, indent=2, sort_keys=False) + "\n", encoding="utf-8")


def percentile(values: Sequence[float], q: float) -> float:
    """The ``q``-th percentile (0-100) with linear interpolation between ranks."""
    if not values:
        raise ValueError("percentile of no values")
    ordered = sorted(values)
    pos = (len(ordered) - 1) * q / 100
    low = int(pos)
    high = min(low + 1, len(ordered) - 1)
    return ordered[low] + (ordered[high] - ordered[low]) * (pos - low)


def ms(ns: float) -> float:
    """Nanoseconds as milliseconds, to 0.1 us."""
    return round(ns / 1e6, 4)


def fmt(value: Any) -> str:
    """Numbers for people: integers with separators, floats with three significant digits."""
    if value is None:
        return "-"
    if isinstance(value, bool):
        return "yes" if value else "no"
    if isinstance(value, int):
        return f"{value:,}"
    if isinstance(value, float):
        if value == 0:
            return "0"
        if abs(value) >= 1000:
            return f"{value:,.0f}"
        return f"{value:.3g}"
    return str(value)


def print_table(
    title: str,
    columns: Sequence[Column],
    rows: Sequence[Mapping[str, Any]],
    *,
    notes: Sequence[str] = (),
    console: Console | None = None,
) -> None:
    out = console or Console()
    # No vertical rules and no edge padding: a dozen numeric columns fit 80 columns.
    table = Table(
        title=title, title_justify="left", box=box.SIMPLE_HEAD, pad_edge=False, show_edge=False
    )
    for _, header in columns:
        table.add_column(header, justify="right", no_wrap=True)
    for row in rows:
        table.add_row(*(fmt(row.get(key)) for key, _ in columns))
    out.print(table)
    wide = sum(max(len(h), *(len(fmt(r.get(k))) for r in rows)) + 2 for k, h in columns)
    if rows and wide > out.width:
        out.print(
            f"(the table needs {wide} columns and this terminal has {out.width}: widen it, "
            "or read the numbers from --out FILE.json)",
            highlight=False,
        )
    for note in notes:
        out.print(note, highlight=False)
