"""Moving a store's data out and in: ``memstrata backup`` copies the embedded SQLite store
while it runs; ``memstrata export`` and ``memstrata import`` move the whole store or one
user (memstrata's JSON Lines, full fidelity) or a user's memory as a DeerFlow
``memory.json`` document."""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import MofNCompleteColumn, Progress, SpinnerColumn, TextColumn

from memstrata.backends.registry import redact
from memstrata.cli._common import (
    Agent,
    Db,
    Init,
    JsonFlag,
    Tenant,
    User,
    errors,
    named_scope,
    note,
    open_memory,
    session,
    settings_for,
)
from memstrata.errors import InvalidInput

__all__ = ["backup", "export_memory", "import_memory"]

FORMATS = ("memstrata", "deerflow")

Format = Annotated[
    str,
    typer.Option(
        "--format",
        help="memstrata: the whole store, or one user with --tenant and --user (JSON Lines, "
        "full fidelity); deerflow: one user's profile and facts (DeerFlow's memory.json).",
    ),
]


def backup(
    out: Annotated[Path, typer.Option("--out", help="The backup file to create.")],
    db: Db = None,
) -> None:
    """Back up the embedded SQLite store while it runs (PostgreSQL: use pg_dump; see
    docs/operations.md)."""
    from memstrata.backup import backup_sqlite

    with errors():
        url = settings_for(db).database_url()
        if not url.startswith("sqlite:///") or url.endswith(":memory:"):
            raise InvalidInput(
                "memstrata backup copies an SQLite file; back up PostgreSQL with pg_dump or "
                "base backups (docs/operations.md)",
                field="db",
            )
        with Progress(console=Console(stderr=True), transient=True) as bar:
            task = bar.add_task("backup", total=None)
            size = backup_sqlite(
                url.removeprefix("sqlite:///"),
                out,
                progress=lambda done, total: bar.update(task, completed=done, total=total),
            )
    typer.echo(f"backed up {redact(url)} to {out} ({size} bytes, integrity ok)")


def _check_format(value: str) -> None:
    if value not in FORMATS:
        raise InvalidInput(
            f"unknown format {value!r}: the supported format is {', '.join(FORMATS)}",
            field="format",
        )


def export_memory(
    format: Format = "memstrata",
    tenant: Tenant = None,
    user: User = None,
    agent: Agent = None,
    out: Annotated[
        Path | None,
        typer.Option("--out", help="Write here instead of stdout.", show_default=False),
    ] = None,
    db: Db = None,
) -> None:
    """Export the store (memstrata format) or a user's memory document (deerflow)."""
    with errors():
        _check_format(format)
        if format == "memstrata":
            _export_native(db, tenant, user, agent, out)
            return
        with session(db, tenant, user, agent) as (mem, scope):
            document = mem.longterm.export(scope, format=format)
        text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
        if out is None:
            typer.echo(text, nl=False)
            return
        out.write_text(text, encoding="utf-8")
    note(f"wrote {len(document['facts'])} facts of {scope.tenant}/{scope.user} to {out}")


def _export_native(
    db: str | None, tenant: str | None, user: str | None, agent: str | None, out: Path | None
) -> None:
    if agent is not None:
        raise InvalidInput("a memstrata export holds whole users: leave out --agent", field="agent")
    if (tenant is None) != (user is None):
        raise InvalidInput("export one user with --tenant and --user, or the whole store")
    with open_memory(db) as mem:
        if out is None:
            counts = mem.transfer.export(typer.echo, tenant=tenant, user=user)
        else:
            with out.open("w", encoding="utf-8") as f, _progress("exporting") as tick:
                counts = mem.transfer.export(
                    lambda line: f.write(line + "\n"), tenant=tenant, user=user, progress=tick
                )
    note(f"exported {counts['rows']} rows and {counts['blobs']} blobs")


@contextmanager
def _progress(what: str) -> Iterator[Callable[[int], None]]:
    """A spinner with a running count on stderr (totals are unknown while streaming)."""
    with Progress(
        SpinnerColumn(),
        TextColumn("{task.description}"),
        MofNCompleteColumn(),
        console=Console(stderr=True),
        transient=True,
    ) as bar:
        task = bar.add_task(what, total=None)
        yield lambda n: bar.advance(task, n)


def _read_document(path: Path) -> object:
    try:
        return json.loads(path.read_bytes())
    except UnicodeDecodeError as exc:
        raise InvalidInput(f"{path} is not UTF-8 text: {exc.reason}", field="document") from None
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            f"{path} is not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}",
            field="document",
        ) from None


def import_memory(
    file: Annotated[Path, typer.Argument(help="The export or memory document.", dir_okay=False)],
    format: Format = "memstrata",
    tenant: Tenant = None,
    user: User = None,
    agent: Agent = None,
    as_json: JsonFlag = False,
    db: Db = None,
    init: Init = False,
) -> None:
    """Import a memstrata export (idempotent: ids are kept, what exists is left alone) or
    add a DeerFlow memory document's profile and facts to a user (all or nothing)."""
    with errors():
        _check_format(format)
        if format == "memstrata":
            if tenant or user or agent:
                raise InvalidInput("a memstrata export names its own owners: no --tenant/--user")
            with (
                open_memory(db, init=init) as mem,
                file.open(encoding="utf-8") as f,
                _progress("importing") as tick,
            ):
                counts = mem.transfer.import_(f, progress=tick)
            typer.echo(
                json.dumps(counts, indent=2)
                if as_json
                else (
                    f"imported {counts['rows']} rows ({counts['added']} new) and {counts['blobs']} "
                    f"blobs; indexed {counts['indexed']} messages for recall"
                )
            )
            return
        # The scope first (a bad --db is the error), then the document, before anything opens.
        scope = named_scope(settings_for(db), tenant, user, agent)
        document = _read_document(file)
        with open_memory(db, init=init) as mem:
            result: dict[str, Any] = mem.longterm.import_memory(scope, document, format=format)
    if as_json:
        typer.echo(json.dumps(result, indent=2))
        return
    typer.echo(
        f"imported into {scope.tenant}/{scope.user}: facts added {result['facts_added']}, "
        f"duplicates skipped {result['duplicates']}, evicted by the cap {result['evicted']}, "
        f"profile sections {result['profile_sections']}"
    )
    for w in result.get("warnings", []):
        typer.echo(f"warning: {w.get('field') or w.get('fact_id')}: {w['warning']}", err=True)
