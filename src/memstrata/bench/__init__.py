"""Named benchmarks, run by ``memstrata bench NAME`` or :func:`run_bench`.

Each benchmark prints a table for people and returns (and optionally writes)
the JSON envelope of DESIGN.md "Benchmark output". Timings are only ever
reported, never asserted.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from rich.console import Console

from memstrata.bench.encryption import MODES, encrypted
from memstrata.bench.report import write_json
from memstrata.errors import InvalidInput

__all__ = ["Benchmark", "names", "run_bench"]


@dataclass(frozen=True, slots=True)
class Benchmark:
    """One named benchmark: how to run it and how to show its result."""

    name: str
    summary: str
    #: ``run(db, sizes, progress, **options)``; options a benchmark does not take are ignored.
    run: Callable[..., dict[str, Any]]
    show: Callable[[dict[str, Any], Console], None]


def _history() -> Benchmark:
    from memstrata.bench import history

    return Benchmark(
        name="history",
        summary="append throughput and history p50/p95 on branched trees of 1k-100k messages",
        run=lambda db, sizes, progress, **_: history.run(db=db, sizes=sizes, progress=progress),
        show=history.print_result,
    )


def _locomo() -> Benchmark:
    from memstrata.bench import locomo

    return Benchmark(
        name="locomo",
        summary="LoCoMo evidence retrieval: turn recall@k of mem.recall.search, with baselines",
        run=lambda db, sizes, progress, data=None, **_: locomo.run(
            data=data, db=db, progress=progress
        ),
        show=locomo.print_result,
    )


def _context_quality() -> Benchmark:
    from memstrata.bench import context_quality

    return Benchmark(
        name="context-quality",
        summary="LoCoMo-format data: evidence in mem.context's recall tier at 1k/2k/4k, off-topic",
        run=lambda db, sizes, progress, data=None, **_: context_quality.run(
            data=data, db=db, progress=progress
        ),
        show=context_quality.print_result,
    )


def _prompt_cache() -> Benchmark:
    from memstrata.bench import prompt_cache

    return Benchmark(
        name="prompt-cache",
        summary="share of each turn's prompt a provider can cache, old and new layout, 2k/8k",
        run=lambda db, sizes, progress, data=None, **_: prompt_cache.run(
            data=data, db=db, progress=progress
        ),
        show=prompt_cache.print_result,
    )


def _recall_natural() -> Benchmark:
    from memstrata.bench import recall_natural

    return Benchmark(
        name="recall-natural",
        summary="a user's own statements in the default context, asked in their words",
        run=lambda db, sizes, progress, data=None, settle=0.0, **_: recall_natural.run(
            data=data, db=db, settle=settle, progress=progress
        ),
        show=recall_natural.print_result,
    )


def _append_embed() -> Benchmark:
    from memstrata.bench import append_embed

    return Benchmark(
        name="append-embed",
        summary="append p50 and bulk ingest turns/s with and without inline embedding",
        run=lambda db, sizes, progress, **_: append_embed.run(
            db=db, sizes=sizes, progress=progress
        ),
        show=append_embed.print_result,
    )


def _nodes() -> Benchmark:
    from memstrata.bench import nodes

    return Benchmark(
        name="nodes",
        summary="node memory add+flush and history at 10-10k turns on files and S3, vs a whole-JSON rewrite",
        run=lambda db, sizes, progress: nodes.run(db=db, sizes=sizes, progress=progress),
        show=nodes.print_result,
    )


def _context() -> Benchmark:
    from memstrata.bench import context

    return Benchmark(
        name="context",
        summary="context assembly p50/p95 on branched trees of 1k and 100k messages",
        run=lambda db, sizes, progress: context.run(db=db, sizes=sizes, progress=progress),
        show=context.print_result,
    )


def _load() -> Benchmark:
    from memstrata.bench import load

    return Benchmark(
        name="load",
        summary="64 concurrent clients on loopback: history and context, errors and p50/p99",
        run=lambda db, sizes, progress, processes=1, **_: load.run(
            db=db, processes=processes, progress=progress
        ),
        show=load.print_result,
    )


def _serve() -> Benchmark:
    from memstrata.bench import serve

    def run(
        db: str | None,
        sizes: list[int] | None,
        progress: Callable[[str], None],
        processes: int = 1,
        time_limit: float | None = None,
        **_: Any,
    ) -> dict[str, Any]:
        return serve.run(
            db=db,
            messages=sizes[0] if sizes else serve.MESSAGES,
            seconds=time_limit or serve.SECONDS,
            processes=processes,
            progress=progress,
        )

    return Benchmark(
        name="serve",
        summary="server CPU per REST request (wrk) against the same call in process",
        run=run,
        show=serve.print_result,
    )


def _peers() -> Benchmark:
    from memstrata.bench import peers

    def run(
        db: str | None,
        sizes: list[int] | None,
        progress: Callable[[str], None],
        data: Path | None = None,
        runs: int | None = None,
        time_limit: float | None = None,
        **_: Any,
    ) -> dict[str, Any]:
        if db is not None:
            raise InvalidInput("bench peers measures fresh SQLite files; --db does not apply")
        return peers.run(
            sizes=sizes,
            runs=runs or peers.RUNS,
            time_limit_s=time_limit or peers.TIME_LIMIT_S,
            data=data,
            progress=progress,
        )

    return Benchmark(
        name="peers",
        summary="memstrata vs LangChain, LlamaIndex, LangGraph (history) and mem0 (recall)",
        run=run,
        show=peers.print_result,
    )


# Loaded on demand, so importing memstrata.bench stays cheap and a later benchmark's
# optional peers (LangChain, mem0, ...) are imported only when that benchmark runs.
_REGISTRY: dict[str, Callable[[], Benchmark]] = {
    "append-embed": _append_embed,
    "context": _context,
    "context-quality": _context_quality,
    "history": _history,
    "load": _load,
    "locomo": _locomo,
    "nodes": _nodes,
    "peers": _peers,
    "prompt-cache": _prompt_cache,
    "recall-natural": _recall_natural,
    "serve": _serve,
}


def names() -> list[str]:
    """The known benchmark names, sorted."""
    return sorted(_REGISTRY)


def run_bench(
    name: str,
    *,
    out: Path | None = None,
    db: str | None = None,
    sizes: list[int] | None = None,
    data: Path | None = None,
    runs: int | None = None,
    time_limit: float | None = None,
    processes: int | None = None,
    settle: float | None = None,
    encryption: str = "off",
) -> dict[str, Any]:
    """Run benchmark ``name``, print its table, write its JSON to ``out`` and return it.

    ``db`` is a database URL to measure instead of a fresh temporary store;
    ``sizes`` overrides the benchmark's default sizes where it has any; ``runs`` and
    ``time_limit`` (seconds) apply to benchmarks that repeat runs or stop slow systems;
    ``processes`` is the number of server processes of ``load``; ``settle`` the seconds
    ``recall-natural`` waits between ingest and its first questions. ``encryption``: off,
    on (encryption at rest, a throwaway keyring) or both, one after the other in this run,
    the encrypted result under the key ``encrypted`` of the unencrypted one.
    """
    factory = _REGISTRY.get(name)
    if factory is None:
        raise InvalidInput(
            f"unknown benchmark {name!r}; known: {', '.join(names())}",
            field="name",
            known=names(),
        )
    bench = factory()
    status = Console(stderr=True)
    given = {
        "data": data,
        "runs": runs,
        "time_limit": time_limit,
        "processes": processes,
        "settle": settle,
    }
    options = {k: v for k, v in given.items() if v is not None}
    if encryption not in MODES:
        raise InvalidInput(f"--encryption is one of {', '.join(MODES)}", field="encryption")

    def once() -> dict[str, Any]:
        return bench.run(
            db, sizes, lambda line: status.print(line, style="dim", highlight=False), **options
        )

    table = Console()
    if not table.is_terminal:  # a pipe or a file: do not squeeze the table into 80 columns
        table = Console(width=120)
    secret: dict[str, Any] | None = None
    if encryption == "on":
        with encrypted():
            result = once()
    else:
        result = once()
        if encryption == "both":
            with encrypted():
                secret = once()
    if encryption != "off":
        table.print(f"encryption at rest: {'off, then on' if secret else 'on'}")
    bench.show(result, table)
    if secret is not None:
        table.print("with encryption at rest on:")
        bench.show(secret, table)
        result = {**result, "encrypted": secret}
    if out is not None:
        write_json(Path(out), result)
        status.print(f"wrote {out}", style="dim", highlight=False)
    return result
