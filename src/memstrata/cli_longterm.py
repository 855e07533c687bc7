"""The long-term memory commands of the ``memstrata`` command line.

``facts list|add|delete`` read and change one user's facts; ``export`` and ``import``
move a user's memory as a DeerFlow ``memory.json`` document; ``jobs list|retry`` show
the background queue, so an extraction that died (or waits for an LLM) is visible
without the REST server; :func:`check_longterm` is doctor's long-term entry.

The commands register themselves on :data:`memstrata.cli.app` when this module is
loaded (``memstrata.cli`` loads it), whichever of the two modules is imported first.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.progress import MofNCompleteColumn, Progress, SpinnerColumn, TextColumn
from rich.table import Table

from memstrata.api import Memory
from memstrata.cli import Db, JsonFlag, _errors, _note, _open, _settings, app, probe
from memstrata.cli_tables import new_table
from memstrata.errors import InvalidInput
from memstrata.jobs.ops import Job, JobStatus
from memstrata.types import Scope

__all__ = ["check_longterm", "facts_app", "jobs_app", "longterm_row"]

facts_app = typer.Typer(help="List, add and delete a user's long-term facts.", no_args_is_help=True)
jobs_app = typer.Typer(
    help="Background jobs (extraction, compaction, ...): list them, retry dead ones.",
    no_args_is_help=True,
)

FORMATS = ("memstrata", "deerflow")

PageLimit = Annotated[int, typer.Option("--limit", help="Items per page.", min=1)]
PageCursor = Annotated[
    str | None,
    typer.Option("--cursor", help="Next page (printed after a full page).", show_default=False),
]
Tenant = Annotated[
    str | None,
    typer.Option("--tenant", help="Tenant (default: the local tenant).", show_default=False),
]
User = Annotated[
    str | None,
    typer.Option("--user", help="User (default: the local user).", show_default=False),
]
Agent = Annotated[
    str | None,
    typer.Option("--agent", help="The agent's own memory of the user.", show_default=False),
]
Format = Annotated[
    str,
    typer.Option(
        "--format",
        help="memstrata: the whole store, or one user with --tenant and --user (JSON Lines, "
        "full fidelity); deerflow: one user's profile and facts (DeerFlow's memory.json).",
    ),
]


def _scope(db: str | None, tenant: str | None, user: str | None, agent: str | None) -> Scope:
    """The scope named on the command line; the local tenant and user stand in for omissions."""
    settings = _settings(db)
    return Scope(tenant or settings.local_tenant, user or settings.local_user, agent)


def _check_format(value: str) -> None:
    if value not in FORMATS:
        raise InvalidInput(
            f"unknown format {value!r}: the supported format is {', '.join(FORMATS)}",
            field="format",
        )


def _table(*headers: str) -> Table:
    """Stored content is shown as text, never markup; an id stays whole, since it is what
    'facts delete' and 'jobs retry' take (see cli_tables)."""
    return new_table(*headers)


# -- facts -----------------------------------------------------------------------------------


@facts_app.command("list")
def facts_list(
    tenant: Tenant = None,
    user: User = None,
    agent: Agent = None,
    status: Annotated[
        str, typer.Option("--status", help="active, superseded, removed, evicted or all.")
    ] = "active",
    category: Annotated[
        str | None,
        typer.Option("--category", help="Only this category.", show_default=False),
    ] = None,
    limit: PageLimit = 100,
    cursor: PageCursor = None,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """List a user's facts, newest first (--json: every field, origin and sources too)."""
    with _errors():
        scope = _scope(db, tenant, user, agent)
        with _open(db) as mem:
            page = mem.facts.list(
                scope, status=status, category=category, limit=limit, cursor=cursor
            )
    if as_json:
        body = {"items": [f.to_dict() for f in page.items], "next_cursor": page.next_cursor}
        typer.echo(json.dumps(body, indent=2, ensure_ascii=False))
        return
    # The status column only when more than one status can show up.
    mixed = status == "all"
    table = _table("id", *(["status"] if mixed else []), "category", "conf.", "content")
    for f in page.items:
        cells = [f.category, f"{f.confidence:.2f}", f.content]
        table.add_row(f.id, *([f.status.value] if mixed else []), *cells)
    Console().print(table)
    if page.next_cursor:
        _note(f"more facts: --cursor {page.next_cursor}")


@facts_app.command("add")
def facts_add(
    content: Annotated[str, typer.Argument(help="What the fact says.")],
    category: Annotated[
        str,
        typer.Option(
            "--category",
            help="preference, knowledge, context, behavior, goal or correction.",
        ),
    ] = "context",
    confidence: Annotated[float, typer.Option("--confidence", help="0 to 1.")] = 1.0,
    source_error: Annotated[
        str | None,
        typer.Option(
            "--source-error", help="For a correction: what was wrong.", show_default=False
        ),
    ] = None,
    tenant: Tenant = None,
    user: User = None,
    agent: Agent = None,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """Add a fact by hand and print its id (a manual fact stays until someone removes it)."""
    with _errors():
        scope = _scope(db, tenant, user, agent)
        with _open(db) as mem:
            fact = mem.facts.add(
                scope, content, category=category, confidence=confidence, source_error=source_error
            )
    if as_json:
        typer.echo(json.dumps(fact.to_dict(), indent=2, ensure_ascii=False))
        return
    _note(f"added fact for {scope.tenant}/{scope.user}")
    typer.echo(fact.id)


@facts_app.command("delete")
def facts_delete(
    fact_id: Annotated[str, typer.Argument(help="The fact id (from 'facts list').")],
    tenant: Tenant = None,
    user: User = None,
    agent: Agent = None,
    db: Db = None,
) -> None:
    """Erase a fact and its history."""
    with _errors():
        scope = _scope(db, tenant, user, agent)
        with _open(db) as mem:
            mem.facts.delete(scope, fact_id)
    typer.echo(f"deleted fact {fact_id}")


# -- export / import -------------------------------------------------------------------------


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
    with _errors():
        _check_format(format)
        if format == "memstrata":
            _export_native(db, tenant, user, agent, out)
            return
        scope = _scope(db, tenant, user, agent)
        with _open(db) as mem:
            document = mem.longterm.export(scope, format=format)
        text = json.dumps(document, indent=2, ensure_ascii=False) + "\n"
        if out is None:
            typer.echo(text, nl=False)
            return
        out.write_text(text, encoding="utf-8")
    _note(f"wrote {len(document['facts'])} facts of {scope.tenant}/{scope.user} to {out}")


def _export_native(
    db: str | None, tenant: str | None, user: str | None, agent: str | None, out: Path | None
) -> None:
    if agent is not None:
        raise InvalidInput("a memstrata export holds whole users: leave out --agent", field="agent")
    if (tenant is None) != (user is None):
        raise InvalidInput("export one user with --tenant and --user, or the whole store")
    with _open(db) as mem:
        if out is None:
            counts = mem.transfer.export(typer.echo, tenant=tenant, user=user)
        else:
            with out.open("w", encoding="utf-8") as f, _progress("exporting") as tick:
                counts = mem.transfer.export(
                    lambda line: f.write(line + "\n"), tenant=tenant, user=user, progress=tick
                )
    _note(f"exported {counts['rows']} rows and {counts['blobs']} blobs")


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
) -> None:
    """Import a memstrata export (idempotent: ids are kept, what exists is left alone) or
    add a DeerFlow memory document's profile and facts to a user (all or nothing)."""
    with _errors():
        _check_format(format)
        if format == "memstrata":
            if tenant or user or agent:
                raise InvalidInput("a memstrata export names its own owners: no --tenant/--user")
            with _open(db) as mem, file.open(encoding="utf-8") as f, _progress("importing") as tick:
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
        scope = _scope(db, tenant, user, agent)
        document = _read_document(file)
        with _open(db) as mem:
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


# -- jobs ------------------------------------------------------------------------------------


def _job_dict(mem: Memory, job: Job) -> dict[str, Any]:
    out = {"tenant": job.tenant, **job.to_dict()}
    # Whether a worker configured like this command could run it (e.g. it has no LLM).
    out["blocked"] = mem.jobs.blocked(job.kind) if job.status is JobStatus.QUEUED else None
    return out


def _first_line(text: str | None, width: int = 100) -> str:
    line = (text or "").strip().split("\n", 1)[0]
    return line if len(line) <= width else line[: width - 1] + "…"


@jobs_app.command("list")
def jobs_list(
    status: Annotated[
        str | None,
        typer.Option("--status", help="queued, running, done or dead.", show_default=False),
    ] = None,
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="Only this tenant's jobs.", show_default=False)
    ] = None,
    user: Annotated[
        str | None, typer.Option("--user", help="Only this user's jobs.", show_default=False)
    ] = None,
    limit: PageLimit = 100,
    cursor: PageCursor = None,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """List jobs, newest first, with why a queued one cannot run here (``blocked``)."""
    with _errors(), _open(db) as mem:
        page = mem.jobs.list(tenant=tenant, user=user, status=status, limit=limit, cursor=cursor)
        jobs = [_job_dict(mem, j) for j in page.items]
    if as_json:
        typer.echo(
            json.dumps(
                {"items": jobs, "next_cursor": page.next_cursor}, indent=2, ensure_ascii=False
            )
        )
        return
    table = _table("id", "kind", "owner", "status", "attempts", "last error", "blocked")
    reasons: dict[str, None] = {}
    for j in jobs:
        blocked = j["blocked"] or ""
        if blocked:
            reasons[blocked] = None
        table.add_row(
            j["id"],
            j["kind"],
            j["tenant"] + (f"/{j['user']}" if j["user"] else ""),
            j["status"],
            f"{j['attempts']}/{j['max_attempts']}",
            _first_line(j["last_error"]),
            blocked.split(":", 1)[0],  # the short reason; the whole one is printed below
        )
    Console().print(table)
    for reason in reasons:
        _note(f"blocked: {reason}")
    if page.next_cursor:
        _note(f"more jobs: --cursor {page.next_cursor}")


@jobs_app.command("retry")
def jobs_retry(
    job_id: Annotated[str, typer.Argument(help="The dead job's id (from 'jobs list').")],
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """Send a dead job back to the queue with fresh attempts (a worker or the server runs it)."""
    with _errors():
        # No worker thread in this short-lived command: it queues the job, a worker runs it.
        settings = _settings(db).model_copy(update={"worker": "off"})
        with Memory.open(settings.database_url(), settings=settings) as mem:
            job = _job_dict(mem, mem.jobs.retry(job_id))
    if as_json:
        typer.echo(json.dumps(job, indent=2, ensure_ascii=False))
        return
    typer.echo(f"job {job_id} ({job['kind']}) is queued again")
    if job["blocked"]:
        _note(f"note: it waits: {job['blocked']}")


# -- doctor ----------------------------------------------------------------------------------


def check_longterm(db: str | None) -> dict[str, Any]:
    """Doctor's long-term entry. Extraction that cannot run here (no LLM) or dead
    extraction jobs are warnings, not failures: nothing is lost, jobs wait."""
    info: dict[str, Any] = {"ok": False}
    if not probe(db, info, lambda mem: mem.longterm.status()):
        return info
    info["ok"] = True
    warnings = []
    if info["reason"]:
        warnings.append(f"extraction disabled: {info['reason']}")
    dead = info["jobs"].get("dead", 0)
    if dead:
        warnings.append(f"{dead} dead extraction job(s): see memstrata jobs list --status dead")
    info["warnings"] = warnings
    return info


def longterm_row(info: dict[str, Any]) -> tuple[str, str, str]:
    """(check, status, detail) of doctor's table."""
    if not info["ok"]:
        return "long-term", "FAILED", info.get("error", "")
    jobs = ", ".join(f"{k} {v}" for k, v in info["jobs"].items())
    extraction = f"extraction {info['extraction']}"
    if info["reason"]:
        extraction += f" ({info['reason']})"
    detail = f"{extraction}; capture {'on' if info['capture'] else 'off'}; jobs: {jobs}"
    dead = info["jobs"].get("dead", 0)
    if dead:
        detail += f"; {dead} dead: see memstrata jobs list --status dead"
    return "long-term", "warning" if info["warnings"] else "ok", detail


# -- registration on the main command line ----------------------------------------------------

app.add_typer(facts_app, name="facts")
app.add_typer(jobs_app, name="jobs")
app.command("export")(export_memory)
app.command("import")(import_memory)
