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
    min_relevance: Annotated[
        float,
        typer.Option("--min-relevance", min=0.0, max=1.0, help="Leave out less relevant hits."),
    ] = 0.0,
    explain: Annotated[
        bool, typer.Option("--explain", help="Show each hit's signals (cosine, keywords, ...).")
    ] = False,
    explain_ids: Annotated[
        list[str] | None,
        typer.Option("--explain-id", help="A message id to account for (repeatable)."),
    ] = None,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """Search a user's past messages (hybrid keyword + semantic recall)."""
    with errors(), session(db, tenant, user, agent) as (mem, scope):
        hits = mem.recall.search(
            scope,
            query,
            k=k,
            conversation_id=conversation,
            min_relevance=min_relevance,
            explain=explain,
            explain_ids=explain_ids or (),
        )
    if as_json:
        dump(
            {
                "hits": [h.to_dict() for h in hits],
                "pending": hits.pending,
                "explained": [e.to_dict() for e in hits.explained],
            }
        )
        return
    console = Console()
    columns = ["relevance", "conversation", "role", "message"]
    if explain:
        columns[1:1] = ["cosine", "keywords"]
    table = new_table(*columns)
    for h in hits:
        text = " ".join(h.message.content.split())
        row = [f"{h.relevance:.3f}", h.conversation_id[-8:], h.message.role.value]
        if explain:
            sig = h.signals or {}
            cos = sig.get("cosine")
            row[1:1] = [
                "-" if cos is None else f"{cos:.3f}",
                f"{sig.get('keyword_coverage', 0):.2f}",
            ]
        table.add_row(*row, text if len(text) <= 60 else text[:59] + "…")
    console.print(table)
    if hits.pending:
        console.print(
            f"{hits.pending} messages are not searchable by meaning yet "
            "(found by keywords; embedded by the next reads or the embedding job)."
        )
    for e in hits.explained:
        where = f" in {e.conversation_id}" if e.conversation_id else ""
        console.print(f"{e.id}{where}: {e.reason.replace('_', ' ')}")


def reindex(
    db: Db = None,
    as_json: JsonFlag = False,
) -> None:
    """Bring recall's indexes up to date: keyword rows for messages stored before recall,
    and vectors of the current embedder for every message (after changing embedders)."""
    from rich.progress import Progress

    with errors(), open_memory(db) as mem:
        emb = mem.recall.embedder
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
