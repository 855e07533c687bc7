"""``memstrata encrypt --all``: seal a store written before encryption at rest was on."""

from __future__ import annotations

from typing import Annotated

import typer

from memstrata.cli._common import Db, errors, fail, note, open_memory, settings_for
from memstrata.transfer.seal import merge_keyword_index, seal_facts, seal_messages

__all__ = ["encrypt"]


def encrypt(
    all_rows: Annotated[
        bool, typer.Option("--all", help="Seal every message and fact still stored in clear.")
    ] = False,
    batch: Annotated[
        int, typer.Option("--batch", min=1, help="Messages (or facts) per transaction.")
    ] = 500,
    db: Db = None,
) -> None:
    """Seal the messages and facts a store holds in clear with their owners' data keys
    (needs MEMSTRATA_ENCRYPT_AT_REST=true and the master key). Resumable: run it again
    after an interruption; sealed rows are skipped. Then VACUUM the database
    (docs/operations.md)."""
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
    typer.echo(f"sealed {sealed} of {read_n} message(s); the rest were sealed already")
    typer.echo(f"sealed {facts_sealed} of {facts_read} fact(s); the rest were sealed already")
