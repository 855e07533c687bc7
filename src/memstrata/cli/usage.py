"""Usage and budgets from the command line: ``memstrata usage`` reports what model calls
cost (per purpose or per user), ``memstrata budgets set|list|clear`` keeps the per-tenant
daily token budgets that hold jobs back once used up (see :mod:`memstrata.usage`)."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from memstrata.cli._common import Db, JsonFlag, PageCursor, dump, errors, note, open_memory
from memstrata.cli.tables import new_table
from memstrata.usage import PURPOSES

__all__ = ["budgets_app", "usage"]

budgets_app = typer.Typer(
    help="Daily token budgets per tenant and purpose: once used up (UTC day), jobs of that "
    "purpose wait as 'blocked: budget' until the next day or a raise.",
    no_args_is_help=True,
)

_PURPOSE_HELP = f"A purpose: {', '.join(PURPOSES)}."


def usage(
    tenant: Annotated[
        str | None,
        typer.Option("--tenant", help="One tenant (default: every tenant).", show_default=False),
    ] = None,
    user: Annotated[
        str | None, typer.Option("--user", help="One user of --tenant.", show_default=False)
    ] = None,
    start: Annotated[
        str | None,
        typer.Option(
            "--from", help="ISO 8601 start (default: 30 days before --to).", show_default=False
        ),
    ] = None,
    end: Annotated[
        str | None,
        typer.Option("--to", help="ISO 8601 end, exclusive (default: now).", show_default=False),
    ] = None,
    group_by: Annotated[str, typer.Option("--group-by", help="purpose or user.")] = "purpose",
    limit: Annotated[int, typer.Option("--limit", help="Groups per page.", min=1)] = 100,
    cursor: PageCursor = None,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """Model calls and tokens over a period, per purpose or per user."""
    with errors(), open_memory(db) as mem:
        report = mem.usage.report(
            tenant, user=user, start=start, end=end, group_by=group_by, limit=limit, cursor=cursor
        )
    if as_json:
        dump(report.to_dict())
        return
    table = new_table(
        group_by, "calls", "errors", "input tokens", "output tokens", "tokens", "seconds"
    )
    for t in [*report.items, report.total]:
        table.add_row(
            "(total)" if t is report.total else (t.key or "(none)"),
            str(t.calls),
            str(t.errors),
            str(t.input_tokens),
            str(t.output_tokens),
            str(t.tokens),
            f"{t.duration_s:.2f}",
        )
    Console().print(table)
    note(f"{report.start.isoformat()} .. {report.end.isoformat()}")
    if report.next_cursor:
        note(f"more: --cursor {report.next_cursor}")


@budgets_app.command("set")
def budgets_set(
    tenant: Annotated[str, typer.Option("--tenant", help="The tenant.")],
    purpose: Annotated[str, typer.Option("--purpose", help=_PURPOSE_HELP)],
    tokens: Annotated[
        int, typer.Option("--tokens", help="Tokens per UTC day (input + output); 0 blocks.", min=0)
    ],
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """Set a tenant's daily token budget of a purpose (a running worker sees it at once)."""
    with errors(), open_memory(db) as mem:
        budget = mem.usage.set_budget(tenant, purpose, tokens)
    if as_json:
        dump(_dict(budget))
        return
    typer.echo(
        f"{tenant}: {purpose} {tokens} tokens a day (used today: {budget.used_today})"
        + (" — used up: its jobs wait" if budget.exhausted else "")
    )


@budgets_app.command("list")
def budgets_list(
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="One tenant (default: all).", show_default=False)
    ] = None,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """The budgets, with what today (UTC) used of each."""
    with errors(), open_memory(db) as mem:
        budgets = mem.usage.budgets(tenant)
    if as_json:
        dump({"items": [_dict(b) for b in budgets]})
        return
    table = new_table("tenant", "purpose", "tokens a day", "used today", "state")
    for b in budgets:
        state = "used up: jobs wait" if b.exhausted else "ok"
        table.add_row(b.tenant, b.purpose, str(b.daily_tokens), str(b.used_today), state)
    Console().print(table)


@budgets_app.command("clear")
def budgets_clear(
    tenant: Annotated[str, typer.Option("--tenant", help="The tenant.")],
    purpose: Annotated[str, typer.Option("--purpose", help=_PURPOSE_HELP)],
    db: Db = None,
) -> None:
    """Remove a budget (no limit for that purpose)."""
    with errors(), open_memory(db) as mem:
        removed = mem.usage.clear_budget(tenant, purpose)
    typer.echo(
        f"{tenant}: {purpose} budget removed" if removed else f"{tenant}: no {purpose} budget"
    )
    if not removed:
        raise typer.Exit(1)


def _dict(budget: object) -> dict[str, object]:
    from memstrata.wire.usage import budget_dict

    return budget_dict(budget, tenant=True)  # type: ignore[arg-type]
