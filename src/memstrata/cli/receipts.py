"""``memstrata receipts show RID``: what a deletion removed and what its verification found;
and the one line the deleting commands print about their receipt."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from memstrata.cli._common import Db, JsonFlag, Tenant, dump, errors, open_memory, settings_for
from memstrata.cli.render import when
from memstrata.cli.tables import new_table
from memstrata.receipts import Receipt
from memstrata.types import Scope

__all__ = ["CLI_ACTOR", "receipt_line", "receipts_app"]

#: The actor a receipt names when the deletion came from this command line.
CLI_ACTOR = "cli"

receipts_app = typer.Typer(
    help="Deletion receipts: what a deletion removed, and what the scan after it found.",
    no_args_is_help=True,
)


def receipt_line(receipt: Receipt) -> str:
    """What a deleting command prints after its own line: the receipt id and its verdict."""
    if receipt.verified is None:
        state = "verification pending"
    elif receipt.verified:
        state = "verified: nothing left"
    else:
        state = "NOT verified: something is left"
    return f"receipt {receipt.id} ({receipt.rows} rows removed; {state})"


@receipts_app.command("show")
def receipts_show(
    receipt_id: Annotated[str, typer.Argument(help="The receipt id (a deletion printed it).")],
    tenant: Tenant = None,
    user: Annotated[
        str | None,
        typer.Option("--user", help="Only that user's receipts (its deletion included)."),
    ] = None,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """Show a deletion receipt of the tenant: counts per table and blob prefix, the deleted
    ids, and the verification scan's result."""
    with errors():
        name = tenant or settings_for(db).local_tenant
        with open_memory(db) as mem:
            if user is None:
                receipt = mem.receipts.get(name, receipt_id)
            else:
                receipt = mem.receipts.get(Scope(name, user), receipt_id, admin=True)
    if as_json:
        dump(receipt.to_dict())
        return
    out = Console()
    owner = receipt.user + (f" (agent {receipt.agent})" if receipt.agent else "")
    typer.echo(f"receipt   {receipt.id}")
    typer.echo(f"deleted   {receipt.kind} of {receipt.tenant}/{owner}, {when(receipt.created_at)}")
    typer.echo(f"by        {receipt.actor}")
    typer.echo(f"ids       {', '.join(receipt.subject_ids)}")
    table = new_table("removed from", "rows")
    for table_name, n in receipt.tables.items():
        table.add_row(table_name, str(n))
    for prefix, n in receipt.blobs.items():
        table.add_row(f"blobs {prefix}", str(n))
    out.print(table)
    if receipt.verified is None:
        typer.echo("verified  not yet")
    else:
        at = when(receipt.verified_at) if receipt.verified_at else ""
        typer.echo(f"verified  {'yes' if receipt.verified else 'NO'} ({at})")
    for finding in receipt.findings:
        typer.echo(f"  left: {finding}")
