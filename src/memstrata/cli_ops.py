"""``memstrata retention``: the per-tenant retention policies that ``memstrata gc --policies``
and the periodic retention job apply (see :mod:`memstrata.retention`)."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console

from memstrata.cli import Db, JsonFlag, _duration, _errors, _open, app
from memstrata.cli_tables import new_table
from memstrata.retention import KINDS

__all__ = ["retention_app"]

retention_app = typer.Typer(
    help="How long each kind of data is kept, per tenant ('*': every other tenant).",
    no_args_is_help=True,
)
Kind = Annotated[str, typer.Option("--kind", help=f"One of: {', '.join(KINDS)}.")]
TenantOpt = Annotated[str, typer.Option("--tenant", help="A tenant, or '*' for all others.")]


@retention_app.command("set")
def retention_set(
    tenant: TenantOpt,
    kind: Kind,
    max_age: Annotated[str, typer.Option("--max-age", help="e.g. 90d, 12h.")],
    db: Db = None,
) -> None:
    """Keep a kind of data of a tenant for a time; the periodic job starts applying it."""
    with _errors(), _open(db) as mem:
        policy = mem.retention.set(tenant, kind, _duration(max_age))
    typer.echo(f"{policy.tenant}: keep {policy.kind} for {max_age}")


@retention_app.command("list")
def retention_list(db: Db = None, as_json: JsonFlag = False) -> None:
    """The stored policies."""
    with _errors(), _open(db) as mem:
        policies = mem.retention.policies()
    if as_json:
        typer.echo(json.dumps([p.to_dict() for p in policies], indent=2))
        return
    table = new_table("tenant", "kind", "max age (days)")
    for p in policies:
        table.add_row(p.tenant, p.kind, f"{p.max_age_s / 86_400:g}")
    Console().print(table)


@retention_app.command("delete")
def retention_delete(tenant: TenantOpt, kind: Kind, db: Db = None) -> None:
    """Remove a policy (that kind of data is then kept until deleted by hand)."""
    with _errors(), _open(db) as mem:
        found = mem.retention.delete(tenant, kind)
    typer.echo(f"deleted the {kind} policy of {tenant}" if found else "no such policy")


app.add_typer(retention_app, name="retention")
