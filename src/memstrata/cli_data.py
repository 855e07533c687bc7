"""The data commands of the ``memstrata`` command line: conversations, messages, history,
context, working memory, node memory and the long-term profile.

So that the stored data can be looked at (and the simple parts changed) from a shell,
without writing a script or running the server. Like the other commands: tables
for people, ``--json`` for scripts, one ``error: ...`` line on stderr and exit 1 on a
memstrata error, and commands that make something print only its id on stdout.

The commands register themselves on :data:`memstrata.cli.app` when this module is
loaded (``memstrata.cli`` loads it), whichever of the CLI modules is imported first;
the scope and paging options are :mod:`memstrata.cli_longterm`'s, so every command
spells them alike.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Sequence
from datetime import datetime
from enum import StrEnum
from typing import Annotated, Any

import typer
from rich.console import Console
from rich.text import Text

# The module, not its names: when cli_longterm is imported first, it is only partly loaded
# while this module runs (cli_longterm -> cli -> here). The scope and paging options are
# used in annotations only, which typer resolves when the command line is built.
from memstrata import cli_longterm as lt
from memstrata.cli import Db, JsonFlag, _errors, _note, _open, app
from memstrata.conversation.render import file_placeholder
from memstrata.errors import InvalidInput, NotFound
from memstrata.types import Message, Status

__all__ = [
    "conversations_app",
    "messages_app",
    "nodes_app",
    "transcript",
    "working_app",
]

conversations_app = typer.Typer(
    help="List, show, create and delete conversations.", no_args_is_help=True
)
messages_app = typer.Typer(help="List a conversation's messages; add one.", no_args_is_help=True)
working_app = typer.Typer(
    help="Working memory: the user's (or a conversation's) scratch document.",
    no_args_is_help=True,
)
nodes_app = typer.Typer(
    help="Node memory of workflow nodes: read a node's thread, delete it.", no_args_is_help=True
)

ConversationId = Annotated[str, typer.Argument(help="The conversation id.")]
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
MaxTokens = Annotated[int, typer.Option("--max-tokens", help="Token budget.", min=0)]
InConversation = Annotated[
    str | None,
    typer.Option(
        "--conversation",
        help="The conversation's document (default: the user's).",
        show_default=False,
    ),
]

STDIN = "-"  # a text argument of "-" is read from stdin, so long or piped text fits


class WorkingFormat(StrEnum):
    MARKDOWN = "markdown"
    JSON = "json"


def _dump(value: object) -> None:
    typer.echo(json.dumps(value, indent=2, ensure_ascii=False))


def _text(value: str) -> str:
    return sys.stdin.read() if value == STDIN else value


def _when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def _short(text: str, width: int = 80) -> Text:
    """One line of user text for a table cell; a Text so brackets are not read as markup."""
    line = " ".join(text.split())
    return Text(line if len(line) <= width else line[: width - 1] + "…")


def transcript(messages: Sequence[Message]) -> str:
    """``role: content`` lines, oldest first, every role included (unlike ``to_text``, which
    keeps only the two chat roles for completion prompts); continuation lines are indented
    so each message still starts at the margin."""
    out: list[str] = []
    for m in messages:
        pieces = [file_placeholder(f) for f in m.files]
        if m.content:
            pieces.append(m.content)
        pieces += [f"[calls {c.function.name}]" for c in m.tool_calls]
        if m.status is Status.PENDING and not pieces:
            pieces.append("(pending)")
        role = m.role.value + (f" ({m.tool_call_id})" if m.tool_call_id else "")
        body = " ".join(pieces).replace("\n", "\n  ")
        out.append(f"{role}: {body}".rstrip())
    return "\n".join(out)


# -- conversations ---------------------------------------------------------------------------


@conversations_app.command("list")
def conversations_list(
    limit: lt.PageLimit = 100,
    cursor: lt.PageCursor = None,
    tenant: lt.Tenant = None,
    user: lt.User = None,
    agent: lt.Agent = None,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """List a user's conversations, newest first."""
    with _errors():
        scope = lt._scope(db, tenant, user, agent)
        with _open(db) as mem:
            page = mem.conversations.list(scope, limit=limit, cursor=cursor)
    if as_json:
        _dump({"items": [c.to_dict() for c in page.items], "next_cursor": page.next_cursor})
        return
    table = lt._table("id", "title", "messages", "updated")
    for c in page.items:
        table.add_row(c.id, Text(c.title or ""), str(c.message_count), _when(c.updated_at))
    Console().print(table)
    if page.next_cursor:
        _note(f"more conversations: --cursor {page.next_cursor}")


@conversations_app.command("show")
def conversations_show(
    conversation_id: ConversationId,
    tenant: lt.Tenant = None,
    user: lt.User = None,
    agent: lt.Agent = None,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """Show a conversation and the leaves (branch ends) of its message tree."""
    with _errors():
        scope = lt._scope(db, tenant, user, agent)
        with _open(db) as mem:
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
        _dump({"conversation": conv.to_dict(), "leaves": [m.to_dict() for m in leaves]})
        return
    console = Console()
    facts = lt._table("field", "value")
    facts.add_row("id", conv.id)
    facts.add_row("title", Text(conv.title or ""))
    facts.add_row(
        "owner", f"{conv.tenant}/{conv.user}" + (f" ({conv.agent})" if conv.agent else "")
    )
    facts.add_row("messages", str(conv.message_count))
    facts.add_row("active leaf", conv.active_leaf_id or "")
    facts.add_row("created", _when(conv.created_at))
    facts.add_row("updated", _when(conv.updated_at))
    console.print(facts)
    table = lt._table("leaf", "active", "depth", "branch tokens", "role", "content")
    for m in leaves:
        table.add_row(
            m.id,
            "yes" if m.id == conv.active_leaf_id else "",
            str(m.depth),
            str(m.branch_tokens),
            m.role.value,
            _short(m.content),
        )
    console.print(table)


@conversations_app.command("create")
def conversations_create(
    title: Annotated[
        str | None, typer.Option("--title", help="A title.", show_default=False)
    ] = None,
    tenant: lt.Tenant = None,
    user: lt.User = None,
    agent: lt.Agent = None,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """Create a conversation and print only its id."""
    with _errors():
        scope = lt._scope(db, tenant, user, agent)
        with _open(db) as mem:
            conv = mem.conversations.create(scope, title=title)
    if as_json:
        _dump(conv.to_dict())
        return
    _note(f"created conversation for {scope.tenant}/{scope.user}")
    typer.echo(conv.id)


@conversations_app.command("delete")
def conversations_delete(
    conversation_id: ConversationId,
    tenant: lt.Tenant = None,
    user: lt.User = None,
    agent: lt.Agent = None,
    db: Db = None,
) -> None:
    """Delete a conversation with its messages, summaries and state."""
    with _errors():
        scope = lt._scope(db, tenant, user, agent)
        with _open(db) as mem:
            mem.conversations.delete(scope, conversation_id)
    typer.echo(f"deleted conversation {conversation_id}")


# -- messages --------------------------------------------------------------------------------


@messages_app.command("list")
def messages_list(
    conversation_id: ConversationId,
    limit: lt.PageLimit = 100,
    cursor: lt.PageCursor = None,
    tenant: lt.Tenant = None,
    user: lt.User = None,
    agent: lt.Agent = None,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """List every message of a conversation, all branches, oldest first."""
    with _errors():
        scope = lt._scope(db, tenant, user, agent)
        with _open(db) as mem:
            page = mem.messages.list(scope, conversation_id, limit=limit, cursor=cursor)
    if as_json:
        _dump({"items": [m.to_dict() for m in page.items], "next_cursor": page.next_cursor})
        return
    table = lt._table("id", "parent", "depth", "role", "status", "tokens", "content")
    for m in page.items:
        table.add_row(
            m.id,
            m.parent_id or "",
            str(m.depth),
            m.role.value,
            m.status.value,
            str(m.token_count),
            _short(m.content),
        )
    Console().print(table)
    if page.next_cursor:
        _note(f"more messages: --cursor {page.next_cursor}")


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
    tenant: lt.Tenant = None,
    user: lt.User = None,
    agent: lt.Agent = None,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """Append a message and print only its id."""
    with _errors():
        scope = lt._scope(db, tenant, user, agent)
        # Left out, parent_id means "after the active leaf"; None would start a new root.
        fields: dict[str, Any] = {"role": role, "content": _text(content)}
        if parent is not None:
            fields["parent_id"] = parent
        with _open(db) as mem:
            message = mem.messages.append(scope, conversation_id, fields)
    if as_json:
        _dump(message.to_dict())
        return
    typer.echo(message.id)


# -- history and context ---------------------------------------------------------------------


def history(
    conversation_id: ConversationId,
    leaf: Leaf = None,
    max_tokens: MaxTokens = 2000,
    max_messages: Annotated[
        int, typer.Option("--max-messages", help="At most this many messages.", min=1)
    ] = 500,
    model: Model = None,
    tenant: lt.Tenant = None,
    user: lt.User = None,
    agent: lt.Agent = None,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """Print the token-budgeted history of a branch as a transcript (--json: messages)."""
    with _errors():
        scope = lt._scope(db, tenant, user, agent)
        with _open(db) as mem:
            h = mem.history(
                scope,
                conversation_id,
                leaf_id=leaf,
                max_tokens=max_tokens,
                max_messages=max_messages,
                model=model,
            )
    if as_json:
        _dump(h.to_dict())
        return
    if h.messages:
        typer.echo(transcript(h.messages))
    cut = "; older messages left out" if h.truncated else ""
    over = "; the newest turn alone is over the budget" if h.over_budget else ""
    _note(f"{len(h.messages)} messages, {h.tokens} tokens ({h.encoding}){cut}{over}")


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
    tenant: lt.Tenant = None,
    user: lt.User = None,
    agent: lt.Agent = None,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """Assemble the context of the next model call: tokens per tier (--json: the messages
    and the whole report)."""
    with _errors():
        scope = lt._scope(db, tenant, user, agent)
        with _open(db) as mem:
            ctx = mem.context(
                scope, conversation_id, leaf_id=leaf, budget=budget, query=query, model=model
            )
    if as_json:
        _dump(ctx.to_dict())
        return
    report = ctx.report
    table = lt._table("tier", "asked", "granted", "items")
    for name, tier in report.tiers.items():
        table.add_row(name, str(tier.asked), str(tier.granted), str(tier.items))
    table.add_row("total", "", str(report.total), str(len(ctx.messages)))
    Console().print(table)
    typer.echo(
        f"budget {report.budget} ({report.encoding}); {len(ctx.messages)} messages; "
        f"dropped {len(report.dropped)}"
    )
    if report.over_budget:
        _note("over budget: the newest turn alone does not fit")
    if report.compaction_due:
        _note("compaction due: the branch has outgrown its summary")


# -- working memory --------------------------------------------------------------------------


@working_app.command("get")
def working_get(
    conversation: InConversation = None,
    tenant: lt.Tenant = None,
    user: lt.User = None,
    agent: lt.Agent = None,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """Print the working-memory document."""
    with _errors():
        scope = lt._scope(db, tenant, user, agent)
        with _open(db) as mem:
            wm = mem.working.get(scope, conversation_id=conversation)
    if as_json:
        _dump(wm.to_dict())
        return
    _note(f"working memory: {wm.format}, version {wm.version}, updated {_when(wm.updated_at)}")
    typer.echo(wm.text)


@working_app.command("put")
def working_put(
    text: Annotated[str, typer.Argument(help="The document ('-': read stdin).")],
    conversation: InConversation = None,
    format: Annotated[
        WorkingFormat | None,
        typer.Option(
            "--format",
            help="markdown, or json (TEXT is parsed as JSON); default: the stored document's.",
            show_default=False,
        ),
    ] = None,
    tenant: lt.Tenant = None,
    user: lt.User = None,
    agent: lt.Agent = None,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """Write the working-memory document (it replaces the previous version)."""
    with _errors():
        scope = lt._scope(db, tenant, user, agent)
        body = _text(text)
        with _open(db) as mem:
            fmt = format.value if format is not None else None
            if fmt is None:
                # Keep a JSON document JSON: a plain string would silently become its value.
                try:
                    fmt = mem.working.get(scope, conversation_id=conversation).format
                except NotFound:
                    fmt = "markdown"
            content: Any = body
            if fmt == "json":
                try:
                    content = json.loads(body)
                except json.JSONDecodeError as exc:
                    raise InvalidInput(
                        f"the document is not JSON: {exc.msg} at line {exc.lineno}, "
                        f"column {exc.colno}",
                        field="content",
                    ) from None
            wm = mem.working.put(
                scope,
                content,
                conversation_id=conversation,
                format="json" if fmt == "json" else "markdown",
            )
    if as_json:
        _dump(wm.to_dict())
        return
    typer.echo(f"working memory version {wm.version} ({wm.format})")


# -- node memory -----------------------------------------------------------------------------

AppId = Annotated[str, typer.Argument(help="The app (workflow) id.")]
NodeId = Annotated[str, typer.Argument(help="The node id.")]


@nodes_app.command("history")
def nodes_history(
    app_id: AppId,
    conversation_id: ConversationId,
    node_id: NodeId,
    max_tokens: MaxTokens = 2000,
    tenant: lt.Tenant = None,
    user: lt.User = None,
    agent: lt.Agent = None,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """Print a node's thread, newest turn last, token-budgeted (--json: messages)."""
    with _errors():
        scope = lt._scope(db, tenant, user, agent)
        with _open(db) as mem:
            h = mem.nodes.history(scope, app_id, conversation_id, node_id, max_tokens=max_tokens)
    if as_json:
        _dump(h.to_dict())
        return
    if h.messages:
        typer.echo(transcript(h.messages))
    cut = "; older turns left out" if h.truncated else ""
    _note(f"{len(h.turns)} turns, {h.tokens} tokens{cut}")


@nodes_app.command("delete")
def nodes_delete(
    app_id: AppId,
    conversation_id: ConversationId,
    node_id: NodeId,
    tenant: lt.Tenant = None,
    user: lt.User = None,
    agent: lt.Agent = None,
    db: Db = None,
) -> None:
    """Forget every turn of a node's memory."""
    with _errors():
        scope = lt._scope(db, tenant, user, agent)
        with _open(db) as mem:
            mem.nodes.delete(scope, app_id, conversation_id, node_id)
    typer.echo(f"deleted node memory {app_id}/{conversation_id}/{node_id}")


# -- profile ---------------------------------------------------------------------------------


def profile(
    tenant: lt.Tenant = None,
    user: lt.User = None,
    agent: lt.Agent = None,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """Show the six sections of a user's long-term profile."""
    with _errors():
        scope = lt._scope(db, tenant, user, agent)
        with _open(db) as mem:
            sections = mem.longterm.profile(scope)
    if as_json:
        _dump({"sections": {s.name: s.to_dict() for s in sections}})
        return
    table = lt._table("section", "updated", "summary")
    for s in sections:
        updated = "" if s.updated_at is None else _when(s.updated_at)
        table.add_row(s.name, updated, Text(s.summary))
    Console().print(table)


# -- registration on the main command line ----------------------------------------------------

app.add_typer(conversations_app, name="conversations")
app.add_typer(messages_app, name="messages")
app.add_typer(working_app, name="working")
app.add_typer(nodes_app, name="nodes")
app.command("history")(history)
app.command("context")(context)
app.command("profile")(profile)
