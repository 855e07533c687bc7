"""Long-term memory from the command line: ``memstrata facts list|add|delete`` read and
change one user's facts; ``memstrata profile`` shows the sections of their profile."""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Annotated

import typer
from rich.console import Console
from rich.text import Text

from memstrata.cli._common import (
    Agent,
    Db,
    Init,
    JsonFlag,
    PageCursor,
    PageLimit,
    Tenant,
    User,
    dump,
    errors,
    note,
    session,
)
from memstrata.cli.receipts import CLI_ACTOR, receipt_line
from memstrata.cli.render import when
from memstrata.cli.tables import new_table

__all__ = ["facts_app", "profile"]

facts_app = typer.Typer(help="List, add and delete a user's long-term facts.", no_args_is_help=True)


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
    as_of: Annotated[
        str | None,
        typer.Option(
            "--as-of",
            help="ISO 8601 time: the facts true then, as known then (default: true now).",
            show_default=False,
        ),
    ] = None,
    known_at: Annotated[
        str | None,
        typer.Option(
            "--known-at",
            help="ISO 8601 time: as known then (default: --as-of; 'now' for as known now).",
            show_default=False,
        ),
    ] = None,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """List a user's facts, newest first (--json: every field, origin, sources and the two
    clocks too). By default the facts true now; --as-of asks about a past time."""
    known = datetime.now(UTC).isoformat() if known_at == "now" else known_at
    with errors(), session(db, tenant, user, agent) as (mem, scope):
        page = mem.facts.list(
            scope,
            status=status,
            category=category,
            limit=limit,
            cursor=cursor,
            as_of=as_of,
            known_at=known,
        )
    if as_json:
        dump({"items": [f.to_dict() for f in page.items], "next_cursor": page.next_cursor})
        return
    # The status column only when more than one status can show up.
    mixed = status == "all"
    table = new_table("id", *(["status"] if mixed else []), "category", "conf.", "content")
    for f in page.items:
        cells = [f.category, f"{f.confidence:.2f}", f.content]
        table.add_row(f.id, *([f.status.value] if mixed else []), *cells)
    Console().print(table)
    if page.next_cursor:
        note(f"more facts: --cursor {page.next_cursor}")


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
    init: Init = False,
) -> None:
    """Add a fact by hand and print its id (a manual fact stays until someone removes it)."""
    with errors(), session(db, tenant, user, agent, init=init) as (mem, scope):
        fact = mem.facts.add(
            scope, content, category=category, confidence=confidence, source_error=source_error
        )
    if as_json:
        dump(fact.to_dict())
        return
    note(f"added fact for {scope.tenant}/{scope.user}")
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
    with errors(), session(db, tenant, user, agent) as (mem, scope):
        receipt = mem.facts.delete(scope, fact_id, actor=CLI_ACTOR)
    typer.echo(f"deleted fact {fact_id}")
    typer.echo(receipt_line(receipt))


# -- profile ---------------------------------------------------------------------------------


def profile(
    tenant: Tenant = None,
    user: User = None,
    agent: Agent = None,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """Show the six sections of a user's long-term profile."""
    with errors(), session(db, tenant, user, agent) as (mem, scope):
        sections = mem.longterm.profile(scope)
    if as_json:
        dump({"sections": {s.name: s.to_dict() for s in sections}})
        return
    table = new_table("section", "updated", "summary")
    for s in sections:
        updated = "" if s.updated_at is None else when(s.updated_at)
        table.add_row(s.name, updated, Text(s.summary))
    Console().print(table)
