"""``memstrata provenance``: what the model saw before a reply, or which replies held a fact."""

from __future__ import annotations

from typing import Annotated

import typer
from rich.console import Console

from memstrata.cli._common import (
    Agent,
    Db,
    JsonFlag,
    PageCursor,
    PageLimit,
    Tenant,
    User,
    dump,
    errors,
    fail,
    note,
    session,
)
from memstrata.cli.render import when
from memstrata.cli.tables import new_table

__all__ = ["provenance"]


def provenance(
    conversation_id: Annotated[
        str | None, typer.Argument(help="The reply's conversation.", show_default=False)
    ] = None,
    message_id: Annotated[
        str | None, typer.Argument(help="The reply (an assistant message).", show_default=False)
    ] = None,
    fact: Annotated[
        str | None,
        typer.Option(
            "--fact",
            help="List the replies whose prompts held this fact instead.",
            show_default=False,
        ),
    ] = None,
    limit: PageLimit = 100,
    cursor: PageCursor = None,
    tenant: Tenant = None,
    user: User = None,
    agent: Agent = None,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """What the model saw before a reply (CID MID): the recorded context linked to it and
    the ids of every item it injected; or, with --fact FID, the replies that fact went into."""
    if fact is not None:
        if conversation_id is not None:
            fail("give either CONVERSATION_ID MESSAGE_ID or --fact, not both")
        with errors(), session(db, tenant, user, agent) as (mem, scope):
            page = mem.provenance.fact_usage(scope, fact, limit=limit, cursor=cursor)
        if as_json:
            dump({"items": [u.to_dict() for u in page.items], "next_cursor": page.next_cursor})
            return
        table = new_table(
            "recorded",
            "conversation",
            "message",
            "context",
            ids=("conversation", "message", "context"),
        )
        for u in page.items:
            table.add_row(when(u.recorded_at), u.conversation_id, u.message_id, u.context_id)
        Console().print(table)
        if page.next_cursor:
            note(f"more replies: --cursor {page.next_cursor}")
        return
    if conversation_id is None or message_id is None:
        fail("give CONVERSATION_ID MESSAGE_ID (or --fact FACT_ID)")
    with errors(), session(db, tenant, user, agent) as (mem, scope):
        found = mem.provenance.get(scope, conversation_id, message_id)
    if as_json:
        dump(found.to_dict())
        return
    record = found.record
    if record is None:
        note(f"no recorded context is linked to message {message_id}")
        return
    table = new_table("tier", "kind", "id", "version", "state")
    for item in record.items:
        version = "" if item.version is None else str(item.version)
        table.add_row(item.tier, item.kind, item.id, version, item.state)
    Console().print(table)
    total = record.report.get("total", "?")
    note(
        f"context {record.id} recorded {when(record.created_at)}: leaf {record.leaf_id}, "
        f"{total} of {record.budget} tokens, {len(record.items)} items"
    )
