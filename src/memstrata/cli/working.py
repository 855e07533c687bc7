"""``memstrata working``: the working-memory document of a user (or of a conversation)."""

from __future__ import annotations

import json
from enum import StrEnum
from typing import Annotated, Any

import typer

from memstrata.cli._common import (
    Agent,
    Db,
    Init,
    JsonFlag,
    Tenant,
    User,
    dump,
    errors,
    note,
    read_text,
    session,
)
from memstrata.cli.render import when
from memstrata.errors import InvalidInput, NotFound

__all__ = ["working_app"]

working_app = typer.Typer(
    help="Working memory: the user's (or a conversation's) scratch document.",
    no_args_is_help=True,
)

InConversation = Annotated[
    str | None,
    typer.Option(
        "--conversation",
        help="The conversation's document (default: the user's).",
        show_default=False,
    ),
]


class WorkingFormat(StrEnum):
    MARKDOWN = "markdown"
    JSON = "json"


@working_app.command("get")
def working_get(
    conversation: InConversation = None,
    tenant: Tenant = None,
    user: User = None,
    agent: Agent = None,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """Print the working-memory document."""
    with errors(), session(db, tenant, user, agent) as (mem, scope):
        wm = mem.working.get(scope, conversation_id=conversation)
    if as_json:
        dump(wm.to_dict())
        return
    note(f"working memory: {wm.format}, version {wm.version}, updated {when(wm.updated_at)}")
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
    tenant: Tenant = None,
    user: User = None,
    agent: Agent = None,
    as_json: JsonFlag = False,
    db: Db = None,
    init: Init = False,
) -> None:
    """Write the working-memory document (it replaces the previous version)."""
    body = read_text(text)
    with errors(), session(db, tenant, user, agent, init=init) as (mem, scope):
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
                    f"the document is not JSON: {exc.msg} at line {exc.lineno}, column {exc.colno}",
                    field="content",
                ) from None
        wm = mem.working.put(
            scope,
            content,
            conversation_id=conversation,
            format="json" if fmt == "json" else "markdown",
        )
    if as_json:
        dump(wm.to_dict())
        return
    typer.echo(f"working memory version {wm.version} ({wm.format})")
