"""Background jobs from the command line: ``memstrata worker`` runs them; ``memstrata jobs
list|retry`` shows the queue and sends a dead job back, so an extraction that died (or
waits for an LLM) is visible without the REST server."""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console

from memstrata.api import Memory
from memstrata.backends.registry import redact
from memstrata.cli._common import (
    Db,
    JsonFlag,
    PageCursor,
    PageLimit,
    dump,
    errors,
    note,
    open_memory,
    settings_for,
)
from memstrata.cli.tables import new_table
from memstrata.jobs import Job, JobStatus
from memstrata.logs import configure_logging

__all__ = ["jobs_app", "worker"]

jobs_app = typer.Typer(
    help="Background jobs (extraction, compaction, ...): list them, retry dead ones.",
    no_args_is_help=True,
)


def worker(
    db: Db = None,
    threads: Annotated[
        int, typer.Option(help="Jobs run at once in this process.", min=1, max=64)
    ] = 2,
    once: Annotated[
        bool, typer.Option("--once", help="Run what is due now, then exit (for cron and tests).")
    ] = False,
) -> None:
    """Run background jobs (compaction, extraction, reindexing, gc) until SIGTERM or Ctrl-C.

    Running jobs finish before it exits; a worker killed outright loses nothing: its
    jobs are reclaimed by another worker when their leases run out.
    """
    import signal
    import threading

    with errors():
        settings = settings_for(db).model_copy(update={"worker": "off"})
        configure_logging(json_logs=settings.log_format == "json", level=settings.log_level)
        mem = Memory.open(settings.database_url(), settings=settings)
        try:
            kinds = mem.jobs.kinds()
            if once:
                ran = mem.jobs.run_pending()
                note(f"ran {ran} job(s)")
                return
            stop = threading.Event()
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: stop.set())
            runner = mem.jobs.worker()
            runner.start(threads=threads)
            note(
                f"worker {runner.name} on {redact(settings.database_url())}: {threads} thread(s), "
                f"kinds: {', '.join(kinds) or '(none registered yet)'}"
            )
            stop.wait()
            note("stopping: letting running jobs finish")
            runner.stop()
        finally:
            mem.close()


def _job_dict(mem: Memory, job: Job, blocked: dict[str, str] | None = None) -> dict[str, Any]:
    out = {"tenant": job.tenant, **job.to_dict()}
    # Whether a worker configured like this command could run it (e.g. it has no LLM), or
    # the tenant's budget of its purpose is used up today ("budget").
    reasons = mem.jobs.blocked_reasons([job]) if blocked is None else blocked
    out["blocked"] = reasons.get(job.id) if job.status is JobStatus.QUEUED else None
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
    with errors(), open_memory(db) as mem:
        page = mem.jobs.list(tenant=tenant, user=user, status=status, limit=limit, cursor=cursor)
        waiting = mem.jobs.blocked_reasons(page.items)
        jobs = [_job_dict(mem, j, waiting) for j in page.items]
    if as_json:
        dump({"items": jobs, "next_cursor": page.next_cursor})
        return
    table = new_table("id", "kind", "owner", "status", "attempts", "last error", "blocked")
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
        note(f"blocked: {reason}")
    if page.next_cursor:
        note(f"more jobs: --cursor {page.next_cursor}")


@jobs_app.command("retry")
def jobs_retry(
    job_id: Annotated[str, typer.Argument(help="The dead job's id (from 'jobs list').")],
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """Send a dead job back to the queue with fresh attempts (a worker or the server runs it)."""
    # No worker thread in this short-lived command: it queues the job, a worker runs it.
    with errors(), open_memory(db) as mem:
        job = _job_dict(mem, mem.jobs.retry(job_id))
    if as_json:
        dump(job)
        return
    typer.echo(f"job {job_id} ({job['kind']}) is queued again")
    if job["blocked"]:
        note(f"note: it waits: {job['blocked']}")
