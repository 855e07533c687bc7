"""A branch's history and the context of the next model call, and compacting a branch:
``memstrata history``, ``memstrata context`` and ``memstrata compact``."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console

from memstrata.cli._common import (
    Agent,
    ConversationId,
    Db,
    JsonFlag,
    MaxTokens,
    Tenant,
    User,
    dump,
    errors,
    note,
    open_memory,
    session,
)
from memstrata.cli.render import transcript
from memstrata.cli.tables import new_table
from memstrata.types import Scope

__all__ = ["compact", "context", "history"]

Leaf = Annotated[
    str | None,
    typer.Option("--leaf", help="The branch ending here (default: active).", show_default=False),
]
Model = Annotated[
    str | None,
    typer.Option(
        "--model",
        help="Count tokens as this model does (default: the store's encoding).",
        show_default=False,
    ),
]


def history(
    conversation_id: ConversationId,
    leaf: Leaf = None,
    max_tokens: MaxTokens = 2000,
    max_messages: Annotated[
        int, typer.Option("--max-messages", help="At most this many messages.", min=1)
    ] = 500,
    model: Model = None,
    tenant: Tenant = None,
    user: User = None,
    agent: Agent = None,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """Print the token-budgeted history of a branch as a transcript (--json: messages)."""
    with errors(), session(db, tenant, user, agent) as (mem, scope):
        h = mem.history(
            scope,
            conversation_id,
            leaf_id=leaf,
            max_tokens=max_tokens,
            max_messages=max_messages,
            model=model,
        )
    if as_json:
        dump(h.to_dict())
        return
    if h.messages:
        typer.echo(transcript(h.messages))
    cut = "; older messages left out" if h.truncated else ""
    over = "; the newest turn alone is over the budget" if h.over_budget else ""
    note(f"{len(h.messages)} messages, {h.tokens} tokens ({h.encoding}){cut}{over}")


def context(
    conversation_id: ConversationId,
    leaf: Leaf = None,
    budget: Annotated[int, typer.Option("--budget", help="Token budget.", min=1)] = 8000,
    query: Annotated[
        str | None,
        typer.Option(
            "--query",
            help="What recall looks for (default: the last user message).",
            show_default=False,
        ),
    ] = None,
    model: Model = None,
    tenant: Tenant = None,
    user: User = None,
    agent: Agent = None,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """Assemble the context of the next model call: tokens per tier (--json: the messages
    and the whole report)."""
    with errors(), session(db, tenant, user, agent) as (mem, scope):
        ctx = mem.context(
            scope, conversation_id, leaf_id=leaf, budget=budget, query=query, model=model
        )
    if as_json:
        dump(ctx.to_dict())
        return
    report = ctx.report
    table = new_table("tier", "asked", "granted", "items")
    for name, tier in report.tiers.items():
        table.add_row(name, str(tier.asked), str(tier.granted), str(tier.items))
    table.add_row("total", "", str(report.total), str(len(ctx.messages)))
    Console().print(table)
    typer.echo(
        f"budget {report.budget} ({report.encoding}); {len(ctx.messages)} messages; "
        f"dropped {len(report.dropped)}"
    )
    if report.over_budget:
        note("over budget: the newest turn alone does not fit")
    if report.compaction_due:
        note("compaction due: the branch has outgrown its summary")


def compact(
    conversation_id: Annotated[str, typer.Argument(help="The conversation to compact.")],
    tenant: Annotated[str, typer.Option("--tenant", help="The conversation's tenant.")],
    user: Annotated[str, typer.Option("--user", help="The conversation's user.")],
    agent: Annotated[
        str | None, typer.Option("--agent", help="The conversation's agent.", show_default=False)
    ] = None,
    leaf: Annotated[
        str | None,
        typer.Option("--leaf", help="Compact this branch (default: active).", show_default=False),
    ] = None,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """Summarise the older part of a conversation's branch now (the raw messages stay)."""
    # Tenant and user are required here: no local defaults stand in for them.
    with errors(), open_memory(db) as mem:
        result = mem.compact(Scope(tenant, user, agent), conversation_id, leaf_id=leaf)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2))
        return
    summary = result.to_dict()["summary"]
    table = new_table("outcome", "reason", "covers up to", "version")
    table.add_row(
        result.outcome,
        result.reason or "",
        "" if not isinstance(summary, dict) else str(summary["up_to_message_id"]),
        "" if not isinstance(summary, dict) else str(summary["version"]),
    )
    Console().print(table)
    if result.outcome == "failed":
        raise typer.Exit(1)
