"""Retention from the command line: ``memstrata gc`` deletes stored data past its age (by
the stored policies or by ages given on the command line; node memory with its objects),
and ``memstrata retention`` keeps the per-tenant policies that ``gc --policies`` and the
periodic retention job apply (see :mod:`memstrata.retention`)."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console

from memstrata.api import Memory
from memstrata.cli._common import Db, JsonFlag, duration, errors, open_memory, settings_for
from memstrata.cli.tables import new_table
from memstrata.retention import KINDS

__all__ = ["gc", "retention_app"]

retention_app = typer.Typer(
    help="How long each kind of data is kept, per tenant ('*': every other tenant).",
    no_args_is_help=True,
)
Kind = Annotated[str, typer.Option("--kind", help=f"One of: {', '.join(KINDS)}.")]
TenantOpt = Annotated[str, typer.Option("--tenant", help="A tenant, or '*' for all others.")]


def gc(
    node_memory: Annotated[
        bool, typer.Option("--node-memory", help="Delete node memories not written lately.")
    ] = False,
    older_than: Annotated[
        str, typer.Option("--older-than", help="With --node-memory: age of the last write.")
    ] = "30d",
    conversations_idle: Annotated[
        str | None,
        typer.Option(
            "--conversations-idle",
            help="Delete conversations idle this long (90d).",
            show_default=False,
        ),
    ] = None,
    jobs_done: Annotated[
        str | None,
        typer.Option(
            "--jobs-done", help="Delete jobs finished this long ago (7d).", show_default=False
        ),
    ] = None,
    checkpoints_expired: Annotated[
        str | None,
        typer.Option(
            "--checkpoints-expired",
            help="Delete checkpoints expired this long ago.",
            show_default=False,
        ),
    ] = None,
    snapshots_idle: Annotated[
        str | None,
        typer.Option(
            "--snapshots-idle",
            help="Delete run snapshots not updated this long.",
            show_default=False,
        ),
    ] = None,
    policies: Annotated[
        bool, typer.Option("--policies", help="Apply the stored retention policies.")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count what would go; delete nothing.")
    ] = False,
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="Only this tenant.", show_default=False)
    ] = None,
    blobs: Annotated[
        str | None,
        typer.Option(
            "--blobs",
            help="Blob store URL (default: MEMSTRATA_BLOBS or files under home).",
            show_default=False,
        ),
    ] = None,
    db: Db = None,
    as_json: JsonFlag = False,
) -> None:
    """Delete stored data past its retention: by the stored policies (--policies), or by the
    ages given here; deletions go through the cascades, so nothing derived is left behind."""
    overrides = {
        kind: duration(age)
        for kind, age in (
            ("conversations", conversations_idle),
            ("jobs", jobs_done),
            ("checkpoints", checkpoints_expired),
            ("snapshots", snapshots_idle),
        )
        if age is not None
    }
    if node_memory and not overrides and not policies:
        _gc_node_memory(duration(older_than), older_than, dry_run, tenant, blobs, db, as_json)
        return
    if node_memory:
        overrides["node_memories"] = duration(older_than)
    if not overrides and not policies:
        raise typer.BadParameter(
            "choose what to collect: --policies, --conversations-idle, --jobs-done, "
            "--checkpoints-expired, --snapshots-idle or --node-memory"
        )
    from rich.progress import Progress

    with errors():
        mem = _open_with_blobs(db, blobs)
        try:
            with Progress(console=Console(stderr=True), transient=True) as bar:
                task = bar.add_task("gc", total=None)

                def step(kind: str, done: int) -> None:
                    bar.update(task, description=f"gc {kind}", completed=done)

                counts: dict[str, int] = {}
                if policies:
                    counts = mem.retention.apply(dry_run=dry_run, tenant=tenant, progress=step)
                if overrides:
                    more = mem.retention.apply(
                        overrides=overrides, dry_run=dry_run, tenant=tenant, progress=step
                    )
                    counts = {k: counts.get(k, 0) + more[k] for k in more}
        finally:
            mem.close()
    if as_json:
        typer.echo(json.dumps({"dry_run": dry_run, "counts": counts}))
        return
    verb = "would delete" if dry_run else "deleted"
    typer.echo(
        ", ".join(f"{verb} {n} {kind}" for kind, n in counts.items() if n or kind in overrides)
    )


def _open_with_blobs(db: str | None, blobs: str | None) -> Memory:
    settings = settings_for(db).model_copy(update={"worker": "off"})
    if blobs:
        settings = settings.model_copy(update={"blobs": blobs})
    return Memory.open(settings.database_url(), blobs=settings.blobs, settings=settings)


def _gc_node_memory(
    seconds: float,
    older_than: str,
    dry_run: bool,
    tenant: str | None,
    blobs: str | None,
    db: str | None,
    as_json: bool,
) -> None:
    """``gc --node-memory`` alone: the node-memory report, with objects and bytes."""
    from rich.progress import Progress

    with errors():
        mem = _open_with_blobs(db, blobs)
        try:
            with Progress(console=Console(stderr=True), transient=True) as bar:
                task = bar.add_task("node memories", total=None)

                def step(done: int, total: int) -> None:
                    bar.update(task, completed=done, total=total)

                report = mem.nodes.gc(seconds, dry_run=dry_run, tenant=tenant, progress=step)
        finally:
            mem.close()
    if as_json:
        typer.echo(json.dumps(report.to_dict()))
        return
    verb = "would delete" if dry_run else "deleted"
    typer.echo(
        f"{verb} {report.node_memories} node memories "
        f"({report.objects} objects, {report.bytes} bytes) last written over {older_than} ago"
    )


@retention_app.command("set")
def retention_set(
    tenant: TenantOpt,
    kind: Kind,
    max_age: Annotated[str, typer.Option("--max-age", help="e.g. 90d, 12h.")],
    db: Db = None,
) -> None:
    """Keep a kind of data of a tenant for a time; the periodic job starts applying it."""
    with errors(), open_memory(db) as mem:
        policy = mem.retention.set(tenant, kind, duration(max_age))
    typer.echo(f"{policy.tenant}: keep {policy.kind} for {max_age}")


@retention_app.command("list")
def retention_list(db: Db = None, as_json: JsonFlag = False) -> None:
    """The stored policies."""
    with errors(), open_memory(db) as mem:
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
    with errors(), open_memory(db) as mem:
        found = mem.retention.delete(tenant, kind)
    typer.echo(f"deleted the {kind} policy of {tenant}" if found else "no such policy")
