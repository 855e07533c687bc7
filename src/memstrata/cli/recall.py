"""``memstrata search`` and ``memstrata reindex``: recall over past messages, and bringing
its keyword and vector indexes up to date."""

from __future__ import annotations

import json
from typing import Annotated

import typer
from rich.console import Console

from memstrata.cli._common import Db, JsonFlag, dump, errors, open_memory, session
from memstrata.cli.tables import new_table

__all__ = ["reindex", "search"]


def search(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    tenant: Annotated[str | None, typer.Option("--tenant", help="Tenant (default: local).")] = None,
    user: Annotated[str | None, typer.Option("--user", help="User (default: local).")] = None,
    agent: Annotated[
        str | None, typer.Option("--agent", help="Only this agent's messages.")
    ] = None,
    k: Annotated[int, typer.Option("-k", "--k", help="How many messages.", min=1, max=200)] = 10,
    conversation: Annotated[
        str | None, typer.Option("--conversation", help="Only this conversation.")
    ] = None,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """Search a user's past messages (hybrid keyword + semantic recall)."""
    with errors(), session(db, tenant, user, agent) as (mem, scope):
        hits = mem.recall.search(scope, query, k=k, conversation_id=conversation)
    if as_json:
        dump({"hits": [h.to_dict() for h in hits]})
        return
    table = new_table("score", "conversation", "role", "when", "message")
    for h in hits:
        text = h.message.content.replace("\n", " ")
        table.add_row(
            f"{h.score:.4f}",
            h.conversation_id[-12:],
            h.message.role.value,
            h.message.occurred_at.strftime("%Y-%m-%d %H:%M"),
            text if len(text) <= 100 else text[:99] + "…",
        )
    Console().print(table)


def reindex(
    db: Db = None,
    as_json: JsonFlag = False,
) -> None:
    """Bring recall's indexes up to date: keyword rows for messages stored before recall,
    and vectors of the current embedder for every message (after changing embedders)."""
    from rich.progress import Progress

    with errors(), open_memory(db) as mem:
        emb = mem.core.recall.embedder  # facade gap: no embedder on mem.recall
        backfilled = mem.recall.backfill()
        todo = mem.recall.pending()
        with Progress(transient=True, disable=as_json) as bar:
            task = bar.add_task(f"embedding with {emb.identity if emb else '-'}", total=todo)
            done = mem.recall.flush(reindex=True, progress=lambda n: bar.advance(task, n))
    result = {
        "embedder": emb.identity if emb else None,
        "keyword_rows_added": backfilled,
        "embedded": done,
    }
    if as_json:
        typer.echo(json.dumps(result, indent=2))
    else:
        typer.echo(
            f"keyword rows added: {backfilled}; embedded: {done} "
            f"({result['embedder'] or 'no embedder: keyword recall only'})"
        )
