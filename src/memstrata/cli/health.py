"""Memory health from the command line: ``memstrata health`` reports near-duplicate,
contradicting, stale and unused facts of one user; ``memstrata consolidate`` shows the
consolidation plan, applies it with ``--apply`` and undoes one with ``--revert ID``."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from memstrata.cli._common import Agent, Db, JsonFlag, Tenant, User, dump, errors, note, session
from memstrata.cli.tables import new_table
from memstrata.longterm.consolidate import Consolidation
from memstrata.longterm.health import MemoryHealth

__all__ = ["consolidate", "health"]


def _print_health(report: MemoryHealth) -> None:
    s = report.sizes
    note(
        f"facts: {s.active} active, {s.superseded} superseded, {s.removed} removed, "
        f"{s.evicted} evicted; {s.profile_sections} profile sections; "
        f"tokens: {s.fact_tokens} in facts, {s.profile_tokens} in the profile"
    )
    table = new_table("check", "count", "example")
    checks = [
        ("near duplicates", report.duplicates),
        ("contradictions", report.contradictions),
        (f"stale (> {report.stale_days} days)", report.stale),
        ("unused", report.unused),
    ]
    for name, check in checks:
        count = "unknown" if check.count is None else str(check.count)
        first = check.examples[0] if check.examples else None
        example = "" if first is None else " | ".join(f"{f.id}: {f.content}" for f in first.facts)
        table.add_row(name, count, example)
    Console().print(table)
    if not report.usage_known:
        note("usage unknown: no recorded contexts here (unused facts cannot be told)")


def health(
    tenant: Tenant = None,
    user: User = None,
    agent: Agent = None,
    stale_days: Annotated[
        int, typer.Option("--stale-days", help="Age after which an untouched fact is stale.")
    ] = 90,
    examples: Annotated[int, typer.Option("--examples", help="Examples per check.")] = 5,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """Report a user's memory health: duplicates, contradictions, stale and unused facts."""
    with errors(), session(db, tenant, user, agent) as (mem, scope):
        report = mem.memory.health(scope, stale_days=stale_days, examples=examples)
    if as_json:
        dump(report.to_dict())
        return
    _print_health(report)


def _print_plan(result: Consolidation) -> None:
    table = new_table("kind", "superseded", "by", "content", "reason")
    for c in result.changes:
        by = c.target_id or "(new fact)"
        olds = ", ".join(f.id for f in c.superseded)
        table.add_row(c.kind, olds, by, c.content, c.reason)
    Console().print(table)
    for line in result.notes:
        note(line)
    if result.applied:
        note(f"applied; undo with: memstrata consolidate --revert {result.id}")
    elif result.changes:
        note("dry run: nothing changed (--apply applies it)")
    else:
        note("nothing to consolidate")


def consolidate(
    tenant: Tenant = None,
    user: User = None,
    agent: Agent = None,
    apply: Annotated[
        bool, typer.Option("--apply", help="Apply the plan (through supersession only).")
    ] = False,
    revert: Annotated[
        str | None,
        typer.Option("--revert", help="Undo the consolidation with this id.", show_default=False),
    ] = None,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """Show (or --apply) the consolidation plan of a user's facts; --revert ID undoes one."""
    with errors(), session(db, tenant, user, agent) as (mem, scope):
        if revert is not None:
            undone = mem.memory.revert(scope, revert)
        else:
            result = mem.memory.consolidate(scope, dry_run=not apply)
    if revert is not None:
        if as_json:
            dump(undone.to_dict())
            return
        note(f"restored {len(undone.restored)} fact(s), retired {len(undone.retired)}")
        for fid in undone.restored:
            typer.echo(fid)
        return
    if as_json:
        dump(result.to_dict())
        return
    _print_plan(result)
