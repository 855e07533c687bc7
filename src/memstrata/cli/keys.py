"""``memstrata keys``: create, list, revoke and rotate API keys.

A command that makes a key prints only the key on stdout, for a script to capture.
"""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Annotated, Any

import typer
from rich.console import Console

from memstrata.cli._common import Db, Init, JsonFlag, duration, errors, note, open_memory
from memstrata.cli.tables import new_table
from memstrata.storage.tenancy import ApiKey

__all__ = ["keys_app"]

keys_app = typer.Typer(help="Create, list and revoke API keys.", no_args_is_help=True)


def _key_dict(key: ApiKey) -> dict[str, Any]:
    return {
        "id": key.id,
        "tenant": key.tenant,
        "user": key.user,
        "admin": key.admin,
        "label": key.label,
        "created_at": key.created_at.isoformat(),
        "revoked_at": None if key.revoked_at is None else key.revoked_at.isoformat(),
        "expires_at": None if key.expires_at is None else key.expires_at.isoformat(),
    }


ExpiresIn = Annotated[
    str | None,
    typer.Option(
        "--expires-in",
        help="The key stops working after this long, e.g. 90d, 12h (default: never).",
        show_default=False,
    ),
]


def _expiry(expires_in: str | None) -> datetime | None:
    if expires_in is None:
        return None
    return datetime.now(UTC) + timedelta(seconds=duration(expires_in))


@keys_app.command("create")
def keys_create(
    tenant: Annotated[str, typer.Option("--tenant", help="Tenant the key belongs to.")],
    user: Annotated[
        str | None, typer.Option("--user", help="User the key acts as.", show_default=False)
    ] = None,
    admin: Annotated[
        bool, typer.Option("--admin", help="An admin key for the tenant instead.")
    ] = False,
    label: Annotated[
        str | None, typer.Option("--label", help="A note to recognise the key by.")
    ] = None,
    expires_in: ExpiresIn = None,
    db: Db = None,
    init: Init = False,
) -> None:
    """Create a key and print only the key on stdout (it is never shown again)."""
    if admin == (user is not None):
        raise typer.BadParameter(
            "give exactly one of --user U or --admin", param_hint="--user / --admin"
        )
    with errors(), open_memory(db, init=init) as mem:
        key, secret = mem.keys.create(
            tenant, user=user, admin=admin, label=label, expires_at=_expiry(expires_in)
        )
    who = "admin" if admin else f"user {user!r}"
    note(f"created key {key.id} for tenant {tenant!r}, {who}")
    typer.echo(secret)


@keys_app.command("list")
def keys_list(
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="Only this tenant's keys.", show_default=False)
    ] = None,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """List keys (never their secrets)."""
    with errors(), open_memory(db) as mem:
        keys = mem.keys.list(tenant)
    if as_json:
        typer.echo(json.dumps([_key_dict(k) for k in keys], indent=2))
        return
    table = new_table("id", "tenant", "user", "admin", "label", "created", "revoked")
    for k in keys:
        table.add_row(
            k.id,
            k.tenant,
            k.user or "",
            "yes" if k.admin else "",
            k.label or "",
            k.created_at.strftime("%Y-%m-%d %H:%M:%S"),
            "" if k.revoked_at is None else k.revoked_at.strftime("%Y-%m-%d %H:%M:%S"),
        )
    Console().print(table)


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="The key id (from 'keys list').")],
    db: Db = None,
) -> None:
    """Revoke a key; it is refused at once, also by a running server."""
    with errors(), open_memory(db) as mem:
        mem.keys.revoke(key_id)
    typer.echo(f"revoked key {key_id}")


@keys_app.command("rotate")
def keys_rotate(
    key_id: Annotated[str, typer.Argument(help="The live key to replace (from 'keys list').")],
    expires_in: ExpiresIn = None,
    db: Db = None,
) -> None:
    """Replace a key: print only the new key on stdout; the old one is refused at once."""
    with errors(), open_memory(db) as mem:
        key, secret = mem.keys.rotate(key_id, expires_at=_expiry(expires_in))
    note(f"revoked key {key_id}; created key {key.id} in its place")
    typer.echo(secret)
