"""``memstrata conversations`` and ``memstrata messages``: list, show, create and delete
conversations; list a conversation's messages and add one.

So that the stored data can be looked at (and the simple parts changed) from a shell,
without writing a script or running the server. Commands that make something print only
its id on stdout.
"""

from __future__ import annotations

from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

from memstrata.cli._common import (
    Agent,
    ConversationId,
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
    read_text,
    session,
)
from memstrata.cli.receipts import CLI_ACTOR, receipt_line
from memstrata.cli.render import short, when
from memstrata.cli.tables import new_table
from memstrata.types import Message

__all__ = ["conversations_app", "messages_app"]

conversations_app = typer.Typer(
    help="List, show, create and delete conversations.", no_args_is_help=True
)
messages_app = typer.Typer(help="List a conversation's messages; add one.", no_args_is_help=True)


# -- conversations ---------------------------------------------------------------------------


@conversations_app.command("list")
def conversations_list(
    limit: PageLimit = 100,
    cursor: PageCursor = None,
    tenant: Tenant = None,
    user: User = None,
    agent: Agent = None,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """List a user's conversations, newest first."""
    with errors(), session(db, tenant, user, agent) as (mem, scope):
        page = mem.conversations.list(scope, limit=limit, cursor=cursor)
    if as_json:
        dump({"items": [c.to_dict() for c in page.items], "next_cursor": page.next_cursor})
        return
    table = new_table("id", "title", "messages", "updated")
    for c in page.items:
        table.add_row(c.id, Text(c.title or ""), str(c.message_count), when(c.updated_at))
    Console().print(table)
    if page.next_cursor:
        note(f"more conversations: --cursor {page.next_cursor}")


@conversations_app.command("show")
def conversations_show(
    conversation_id: ConversationId,
    tenant: Tenant = None,
    user: User = None,
    agent: Agent = None,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """Show a conversation and the leaves (branch ends) of its message tree."""
    with errors(), session(db, tenant, user, agent) as (mem, scope):
        conv = mem.conversations.get(scope, conversation_id)
        leaves: list[Message] = []
        cursor: str | None = None
        while True:  # a tree has few leaves; follow the pages to show them all
            page = mem.messages.leaves(scope, conversation_id, cursor=cursor)
            leaves += page.items
            cursor = page.next_cursor
            if cursor is None:
                break
    if as_json:
        dump({"conversation": conv.to_dict(), "leaves": [m.to_dict() for m in leaves]})
        return
    console = Console()
    facts = new_table("field", "value")
    facts.add_row("id", conv.id)
    facts.add_row("title", Text(conv.title or ""))
    facts.add_row(
        "owner", f"{conv.tenant}/{conv.user}" + (f" ({conv.agent})" if conv.agent else "")
    )
    facts.add_row("messages", str(conv.message_count))
    facts.add_row("active leaf", conv.active_leaf_id or "")
    facts.add_row("created", when(conv.created_at))
    facts.add_row("updated", when(conv.updated_at))
    console.print(facts)
    table = new_table("leaf", "active", "depth", "branch tokens", "role", "content")
    for m in leaves:
        table.add_row(
            m.id,
            "yes" if m.id == conv.active_leaf_id else "",
            str(m.depth),
            str(m.branch_tokens),
            m.role.value,
            short(m.content),
        )
    console.print(table)


@conversations_app.command("create")
def conversations_create(
    title: Annotated[
        str | None, typer.Option("--title", help="A title.", show_default=False)
    ] = None,
    tenant: Tenant = None,
    user: User = None,
    agent: Agent = None,
    as_json: JsonFlag = False,
    db: Db = None,
    init: Init = False,
) -> None:
    """Create a conversation and print only its id."""
    with errors(), session(db, tenant, user, agent, init=init) as (mem, scope):
        conv = mem.conversations.create(scope, title=title)
    if as_json:
        dump(conv.to_dict())
        return
    note(f"created conversation for {scope.tenant}/{scope.user}")
    typer.echo(conv.id)


@conversations_app.command("delete")
def conversations_delete(
    conversation_id: ConversationId,
    tenant: Tenant = None,
    user: User = None,
    agent: Agent = None,
    db: Db = None,
) -> None:
    """Delete a conversation with its messages, summaries and state."""
    with errors(), session(db, tenant, user, agent) as (mem, scope):
        receipt = mem.conversations.delete(scope, conversation_id, actor=CLI_ACTOR)
    typer.echo(f"deleted conversation {conversation_id}")
    typer.echo(receipt_line(receipt))


# -- messages --------------------------------------------------------------------------------


@messages_app.command("list")
def messages_list(
    conversation_id: ConversationId,
    limit: PageLimit = 100,
    cursor: PageCursor = None,
    tenant: Tenant = None,
    user: User = None,
    agent: Agent = None,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """List every message of a conversation, all branches, oldest first."""
    with errors(), session(db, tenant, user, agent) as (mem, scope):
        page = mem.messages.list(scope, conversation_id, limit=limit, cursor=cursor)
    if as_json:
        dump({"items": [m.to_dict() for m in page.items], "next_cursor": page.next_cursor})
        return
    table = new_table("id", "parent", "depth", "role", "status", "tokens", "content")
    for m in page.items:
        table.add_row(
            m.id,
            m.parent_id or "",
            str(m.depth),
            m.role.value,
            m.status.value,
            str(m.token_count),
            short(m.content),
        )
    Console().print(table)
    if page.next_cursor:
        note(f"more messages: --cursor {page.next_cursor}")


@messages_app.command("add")
def messages_add(
    conversation_id: ConversationId,
    role: Annotated[str, typer.Option("--role", help="user, assistant or system.")],
    content: Annotated[str, typer.Option("--content", help="The text ('-': read stdin).")],
    parent: Annotated[
        str | None,
        typer.Option(
            "--parent",
            help="Reply to this message (a new branch); default: after the active leaf.",
            show_default=False,
        ),
    ] = None,
    tenant: Tenant = None,
    user: User = None,
    agent: Agent = None,
    as_json: JsonFlag = False,
    db: Db = None,
    init: Init = False,
) -> None:
    """Append a message and print only its id."""
    # Left out, parent_id means "after the active leaf"; None would start a new root.
    fields: dict[str, Any] = {"role": role, "content": read_text(content)}
    if parent is not None:
        fields["parent_id"] = parent
    with errors(), session(db, tenant, user, agent, init=init) as (mem, scope):
        message = mem.messages.append(scope, conversation_id, fields)
    if as_json:
        dump(message.to_dict())
        return
    typer.echo(message.id)
