"""Tenants, users and API keys: the owners every scope names."""

from __future__ import annotations

import hashlib
import secrets
from dataclasses import dataclass
from datetime import datetime

from memstrata.errors import Conflict, InvalidInput, NotFound
from memstrata.storage.plan import Exec, Op, Query
from memstrata.storage.records import from_micros

__all__ = [
    "ApiKey",
    "Principal",
    "authenticate",
    "create_key",
    "ensure_user",
    "hash_secret",
    "list_keys",
    "list_users",
    "lock_user",
    "revoke_key",
    "user_exists",
]

KEY_PREFIX = "msk"


@dataclass(frozen=True, slots=True)
class Principal:
    """Who a key speaks for: a user of a tenant, or a tenant's admin (``user`` None)."""

    key_id: str
    tenant: str
    user: str | None
    admin: bool


@dataclass(frozen=True, slots=True)
class ApiKey:
    id: str
    tenant: str
    user: str | None
    admin: bool
    label: str | None
    created_at: datetime
    revoked_at: datetime | None
    expires_at: datetime | None = None


def hash_secret(secret: str) -> str:
    """Keys carry 256 random bits, so a plain SHA-256 is enough to store them safely."""
    return hashlib.sha256(secret.encode()).hexdigest()


def ensure_user(tenant: str, user: str, now: int) -> Op[None]:
    """Create the user if absent, and hold its row shared until commit.

    A user delete holds the row exclusively before it reads anything (see
    :func:`lock_user`), so a write that creates rows under a user either commits
    before the delete starts its reads (and is deleted with the user) or waits
    for it and then finds the row gone; it then creates the user afresh, as a
    write after the delete. Lock order: user, then conversation, then the rest.
    """
    yield Exec(
        "INSERT INTO tenants (id, created_at) VALUES (?, ?) ON CONFLICT DO NOTHING", (tenant, now)
    )
    for _ in range(3):
        yield Exec(
            "INSERT INTO users (tenant_id, id, created_at) VALUES (?, ?, ?) ON CONFLICT DO NOTHING",
            (tenant, user, now),
        )
        rows = yield Query(
            "SELECT 1 FROM users WHERE tenant_id = ? AND id = ?", (tenant, user), lock="share"
        )
        if rows:
            return
    raise Conflict(f"user {user} is being deleted and created at once; retry")


def lock_user(tenant: str, user: str) -> Op[bool]:
    """Hold the user's row exclusively until commit (a delete's first step); False if absent."""
    rows = yield Query(
        "SELECT 1 FROM users WHERE tenant_id = ? AND id = ?", (tenant, user), lock="update"
    )
    return bool(rows)


def user_exists(tenant: str, user: str) -> Op[bool]:
    rows = yield Query("SELECT 1 FROM users WHERE tenant_id = ? AND id = ?", (tenant, user))
    return bool(rows)


def list_users(tenant: str, after: str | None, limit: int) -> Op[list[tuple[str, datetime]]]:
    rows = yield Query(
        "SELECT id, created_at FROM users WHERE tenant_id = ? AND id > ? ORDER BY id LIMIT ?",
        (tenant, after or "", limit),
    )
    return [(user, from_micros(created_at)) for user, created_at in rows]


def create_key(
    tenant: str,
    user: str | None,
    admin: bool,
    label: str | None,
    now: int,
    expires_at: int | None = None,
) -> Op[tuple[ApiKey, str]]:
    """Create a key; returns the record and the secret, which is shown only once.
    ``expires_at`` (µs): refused from then on, like a revoked key."""
    if expires_at is not None and expires_at <= now:
        raise InvalidInput("a key must expire in the future", field="expires_at")
    yield Exec(
        "INSERT INTO tenants (id, created_at) VALUES (?, ?) ON CONFLICT DO NOTHING", (tenant, now)
    )
    if user is not None:
        yield from ensure_user(tenant, user, now)
    key_id = secrets.token_hex(6)
    # Hex keeps the key one unambiguous token: msk_<id>_<64 hex chars, 256 random bits>.
    secret = f"{KEY_PREFIX}_{key_id}_{secrets.token_hex(32)}"
    yield Exec(
        "INSERT INTO api_keys (id, tenant_id, user_id, is_admin, secret_hash, label, created_at, "
        "expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
        (key_id, tenant, user, int(admin), hash_secret(secret), label, now, expires_at),
    )
    expiry = None if expires_at is None else from_micros(expires_at)
    return ApiKey(key_id, tenant, user, admin, label, from_micros(now), None, expiry), secret


def rotate_key(key_id: str, now: int, expires_at: int | None = None) -> Op[tuple[ApiKey, str]]:
    """Revoke a live key and create its successor (same tenant, user, role and label) in
    one transaction: the old secret is refused from the moment the new one exists."""
    rows = yield Query(
        "SELECT tenant_id, user_id, is_admin, label FROM api_keys WHERE id = ? AND revoked_at IS NULL",
        (key_id,),
    )
    if not rows:
        raise NotFound(f"no live key {key_id!r}")
    tenant, user, admin, label = rows[0]
    yield from revoke_key(key_id, now)
    return (yield from create_key(tenant, user, bool(admin), label, now, expires_at))


def authenticate(secret: str, now: int) -> Op[Principal | None]:
    rows = yield Query(
        "SELECT id, tenant_id, user_id, is_admin FROM api_keys "
        "WHERE secret_hash = ? AND revoked_at IS NULL AND (expires_at IS NULL OR expires_at > ?)",
        (hash_secret(secret), now),
    )
    if not rows:
        return None
    key_id, tenant, user, admin = rows[0]
    return Principal(key_id=key_id, tenant=tenant, user=user, admin=bool(admin))


def list_keys(tenant: str | None) -> Op[list[ApiKey]]:
    sql = (
        "SELECT id, tenant_id, user_id, is_admin, label, created_at, revoked_at, expires_at "
        "FROM api_keys"
    )
    params: tuple[str, ...] = ()
    if tenant is not None:
        sql += " WHERE tenant_id = ?"
        params = (tenant,)
    rows = yield Query(sql + " ORDER BY created_at, id", params)
    return [
        ApiKey(
            key_id,
            tenant_id,
            user_id,
            bool(admin),
            label,
            from_micros(created_at),
            None if revoked_at is None else from_micros(revoked_at),
            None if expires_at is None else from_micros(expires_at),
        )
        for key_id, tenant_id, user_id, admin, label, created_at, revoked_at, expires_at in rows
    ]


def revoke_key(key_id: str, now: int) -> Op[None]:
    n = yield Exec(
        "UPDATE api_keys SET revoked_at = ? WHERE id = ? AND revoked_at IS NULL", (now, key_id)
    )
    if not n:
        rows = yield Query("SELECT 1 FROM api_keys WHERE id = ?", (key_id,))
        if not rows:
            raise NotFound(f"no key {key_id!r}")
