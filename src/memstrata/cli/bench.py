"""``memstrata bench``: run a benchmark, print its table and write its JSON envelope."""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from memstrata.cli._common import errors
from memstrata.errors import MissingDependency

__all__ = ["bench"]


def _parse_sizes(values: list[str] | None) -> list[int] | None:
    if not values:
        return None
    sizes: list[int] = []
    for value in values:
        for part in value.split(","):
            part = part.strip().replace("_", "")
            if not part:
                continue
            if not part.isdigit() or int(part) < 1:
                raise typer.BadParameter(
                    f"{part!r} is not a positive integer", param_hint="--sizes"
                )
            sizes.append(int(part))
    return sizes or None


def bench(
    name: Annotated[str, typer.Argument(help="Benchmark name, e.g. history.")],
    out: Annotated[
        Path | None, typer.Option("--out", help="Write the JSON result here.", show_default=False)
    ] = None,
    db: Annotated[
        str | None,
        typer.Option("--db", help="Database URL to measure (default: a fresh temporary store)."),
    ] = None,
    sizes: Annotated[
        list[str] | None,
        typer.Option("--sizes", help="Sizes to measure, e.g. --sizes 1000,10000 (repeatable)."),
    ] = None,
    data: Annotated[
        Path | None,
        typer.Option(
            "--data",
            help="Data set of the benchmark (locomo, context-quality, peers: the LoCoMo JSON file; recall-natural: its own JSON).",
        ),
    ] = None,
    runs: Annotated[
        int | None,
        typer.Option("--runs", min=1, help="Repeated runs whose median is reported (peers)."),
    ] = None,
    time_limit: Annotated[
        float | None,
        typer.Option(
            "--time-limit",
            min=1,
            help="Seconds of appends after which a system is reported as 'over' (peers); "
            "seconds of load per operation (serve).",
        ),
    ] = None,
    processes: Annotated[
        int | None,
        typer.Option("--processes", min=1, help="Server processes (load, serve)."),
    ] = None,
    settle: Annotated[
        float | None,
        typer.Option(
            "--settle",
            min=0,
            help="Seconds between ingest and the first questions (recall-natural).",
        ),
    ] = None,
    encryption: Annotated[
        str,
        typer.Option(
            "--encryption",
            help="Encryption at rest: off, on, or both (one after the other in this run; "
            "the JSON gets the encrypted result under 'encrypted').",
        ),
    ] = "off",
) -> None:
    """Run a benchmark: prints a table and writes the JSON envelope with --out."""
    parsed = _parse_sizes(sizes)
    with errors():
        try:
            from memstrata.bench import run_bench
        except ImportError as exc:
            raise MissingDependency(f"benchmarks are not available: {exc}") from None
        run_bench(
            name,
            out=out,
            db=db,
            sizes=parsed,
            data=data,
            runs=runs,
            time_limit=time_limit,
            processes=processes,
            settle=settle,
            encryption=encryption,
        )
