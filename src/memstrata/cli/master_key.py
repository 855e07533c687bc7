"""``memstrata master-key``: make and rotate the master key of encryption at rest.

The master key wraps every user's data key in the keyring (``MEMSTRATA_KEYRING``); it is
kept apart from the store and from the keyring's own backups (see docs/operations.md).
"""

from __future__ import annotations

from pathlib import Path
from typing import Annotated

import typer

from memstrata.cli._common import errors, fail, note
from memstrata.config import Settings
from memstrata.keyring import create_master_key, keyring_dir, rotate_master_key

__all__ = ["master_key_app"]

master_key_app = typer.Typer(
    help="Make and rotate the master key of encryption at rest.", no_args_is_help=True
)


@master_key_app.command("create")
def master_key_create(
    out: Annotated[Path, typer.Option("--out", help="The new key file (never overwritten).")],
) -> None:
    """Write a new random master key to FILE (owner-only permissions); prints its
    fingerprint. Point MEMSTRATA_MASTER_KEY_FILE at it."""
    with errors():
        fingerprint = create_master_key(out)
    typer.echo(fingerprint)
    note(f"master key written to {out}; keep a copy apart from the store and its backups")


@master_key_app.command("rotate")
def master_key_rotate() -> None:
    """Replace the key in MEMSTRATA_MASTER_KEY_FILE with a new one, rewrapping every data
    key of the keyring; run it again to finish an interrupted rotation. Prints the new
    fingerprint."""
    settings = Settings()
    if settings.master_key_file is None:
        fail("set MEMSTRATA_MASTER_KEY_FILE to the current master key")
    with errors():
        fingerprint, n = rotate_master_key(keyring_dir(settings), settings.master_key_file)
    typer.echo(fingerprint)
    note(f"{n} data key(s) rewrapped; the old master key no longer opens the keyring")
