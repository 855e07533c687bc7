"""``memstrata nodes``: the node memory of workflow nodes; read a node's thread, delete it."""

from __future__ import annotations

from typing import Annotated

import typer

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
    session,
)
from memstrata.cli.render import transcript

__all__ = ["nodes_app"]

nodes_app = typer.Typer(
    help="Node memory of workflow nodes: read a node's thread, delete it.", no_args_is_help=True
)

AppId = Annotated[str, typer.Argument(help="The app (workflow) id.")]
NodeId = Annotated[str, typer.Argument(help="The node id.")]


@nodes_app.command("history")
def nodes_history(
    app_id: AppId,
    conversation_id: ConversationId,
    node_id: NodeId,
    max_tokens: MaxTokens = 2000,
    tenant: Tenant = None,
    user: User = None,
    agent: Agent = None,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """Print a node's thread, newest turn last, token-budgeted (--json: messages)."""
    with errors(), session(db, tenant, user, agent) as (mem, scope):
        h = mem.nodes.history(scope, app_id, conversation_id, node_id, max_tokens=max_tokens)
    if as_json:
        dump(h.to_dict())
        return
    if h.messages:
        typer.echo(transcript(h.messages))
    cut = "; older turns left out" if h.truncated else ""
    note(f"{len(h.turns)} turns, {h.tokens} tokens{cut}")


@nodes_app.command("delete")
def nodes_delete(
    app_id: AppId,
    conversation_id: ConversationId,
    node_id: NodeId,
    tenant: Tenant = None,
    user: User = None,
    agent: Agent = None,
    db: Db = None,
) -> None:
    """Forget every turn of a node's memory."""
    with errors(), session(db, tenant, user, agent) as (mem, scope):
        mem.nodes.delete(scope, app_id, conversation_id, node_id)
    typer.echo(f"deleted node memory {app_id}/{conversation_id}/{node_id}")
