"""The ``memstrata`` command line: the Typer ``app`` and its entry point ``main``.

Tables are for people; ``--json`` is for scripts. Errors print one line on stderr and
exit 1 (2 for a wrong command line). Commands that print a value a script captures
(``keys create``) print only that value on stdout.

Each command group lives in its own module and knows nothing of ``app``: this module
imports them and adds them here, in the order ``memstrata --help`` lists them.
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Annotated, Any

import typer

from memstrata.cli import (
    bench,
    context,
    conversations,
    doctor,
    encrypt,
    health,
    jobs,
    keys,
    longterm,
    master_key,
    mcp,
    nodes,
    provenance,
    recall,
    receipts,
    retention,
    serve,
    transfer,
    usage,
    working,
)

__all__ = ["app", "main"]

app = typer.Typer(
    name="memstrata",
    help="memstrata: a memory layer for LLM chat apps and agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        from memstrata import __version__

        typer.echo(f"memstrata {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the version and exit.",
        ),
    ] = False,
) -> None:
    """memstrata: a memory layer for LLM chat apps and agents."""


COMMANDS: tuple[tuple[str, Callable[..., Any]], ...] = (
    ("serve", serve.serve),
    ("migrate", doctor.migrate),
    ("doctor", doctor.doctor),
    ("encrypt", encrypt.encrypt),
    ("search", recall.search),
    ("reindex", recall.reindex),
    ("worker", jobs.worker),
    ("bench", bench.bench),
    ("gc", retention.gc),
    ("backup", transfer.backup),
    ("compact", context.compact),
    ("export", transfer.export_memory),
    ("import", transfer.import_memory),
    ("history", context.history),
    ("context", context.context),
    ("profile", longterm.profile),
    ("mcp", mcp.mcp),
    ("provenance", provenance.provenance),
    ("health", health.health),
    ("consolidate", health.consolidate),
    ("usage", usage.usage),
)
GROUPS: tuple[tuple[str, typer.Typer], ...] = (
    ("keys", keys.keys_app),
    ("facts", longterm.facts_app),
    ("jobs", jobs.jobs_app),
    ("conversations", conversations.conversations_app),
    ("messages", conversations.messages_app),
    ("working", working.working_app),
    ("nodes", nodes.nodes_app),
    ("retention", retention.retention_app),
    ("budgets", usage.budgets_app),
    ("receipts", receipts.receipts_app),
    ("master-key", master_key.master_key_app),
)

for _name, _command in COMMANDS:
    app.command(_name)(_command)
for _name, _group in GROUPS:
    app.add_typer(_group, name=_name)


def main() -> None:
    """Console entry point (``memstrata``)."""
    app()
