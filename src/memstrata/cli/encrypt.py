"""``memstrata encrypt --all``: seal a store written before encryption at rest was on."""

from __future__ import annotations

from typing import Annotated, Any

import typer

from memstrata.cli._common import Db, errors, fail, note, open_memory, settings_for
from memstrata.context import prefix
from memstrata.transfer.seal import (
    COLUMNS,
    SealedColumn,
    merge_keyword_index,
    seal_column,
    seal_facts,
    seal_messages,
)

__all__ = ["encrypt"]


def _seal_column(admin: Any, spec: SealedColumn, batch: int) -> tuple[str, int, int]:
    """Every batch of one column's rows; its name, rows read and values sealed."""
    last = None
    rows_read = values_sealed = 0
    while True:
        last, n, done = admin.write(seal_column, spec, last, batch)
        rows_read, values_sealed = rows_read + n, values_sealed + done
        if not n:
            break
        note(f"{spec.name}: {rows_read} row(s) read, {values_sealed} value(s) sealed")
    return spec.name, rows_read, values_sealed


def encrypt(
    all_rows: Annotated[
        bool, typer.Option("--all", help="Seal every text of the store still stored in clear.")
    ] = False,
    batch: Annotated[int, typer.Option("--batch", min=1, help="Rows per transaction.")] = 500,
    db: Db = None,
) -> None:
    """Seal every text a store holds in clear (messages, facts, titles, metadata, profile,
    summaries, agent state, graph checkpoints and store items, context records, iteration
    and extraction logs, node memory objects) with its owner's data key (needs
    MEMSTRATA_ENCRYPT_AT_REST=true and the master key). Resumable: run it again after an
    interruption; sealed values are skipped. Then VACUUM the database (docs/operations.md)."""
    if not all_rows:
        fail("say --all: memstrata encrypt seals the whole store")
    if not settings_for(db).encrypt_at_rest:
        fail("set MEMSTRATA_ENCRYPT_AT_REST=true (and MEMSTRATA_MASTER_KEY_FILE) first")
    read_n = sealed = 0
    with errors(), open_memory(db) as mem:
        admin = mem.admin  # a store-wide migration: no scope
        after = 0
        while True:
            after, n, done = admin.write(seal_messages, admin.dialect, after, batch)
            read_n, sealed = read_n + n, sealed + done
            if not n:
                break
            note(f"{read_n} message(s) read, {sealed} sealed")
        admin.write(merge_keyword_index, admin.dialect)
        after = facts_read = facts_sealed = 0
        while True:
            after, n, done = admin.write(seal_facts, after, batch)
            facts_read, facts_sealed = facts_read + n, facts_sealed + done
            if not n:
                break
            note(f"{facts_read} fact(s) read, {facts_sealed} sealed")
        others = [_seal_column(admin, spec, batch) for spec in COLUMNS]
        objects = admin.seal_node_objects()
        chains = admin.write(prefix.forget_all)
    typer.echo(f"sealed {sealed} of {read_n} message(s); the rest were sealed already")
    typer.echo(f"sealed {facts_sealed} of {facts_read} fact(s); the rest were sealed already")
    for name, rows_read, values_sealed in others:
        if rows_read:
            typer.echo(f"sealed {values_sealed} value(s) of {name} in {rows_read} row(s)")
    typer.echo(f"sealed {objects} node memory object(s) of the blob store")
    typer.echo(f"forgot {chains} context prefix chain(s): each is kept again keyed")
