"""Users of a tenant, for administrators (sans-IO)."""

from __future__ import annotations

from datetime import datetime

from memstrata.errors import NotFound
from memstrata.runtime import Runtime, page_limit
from memstrata.storage import tenancy
from memstrata.storage.plan import Op
from memstrata.storage.sql import decode_cursor, encode_cursor
from memstrata.types import Page

__all__ = ["delete_user", "list_users"]


def list_users(
    rt: Runtime, tenant: str, *, limit: int | None = None, cursor: str | None = None
) -> Op[Page[tuple[str, datetime]]]:
    n = page_limit(rt, limit)
    rows = yield from tenancy.list_users(tenant, decode_cursor(cursor), n + 1)
    items = rows[:n]
    return Page(items, encode_cursor(items[-1][0]) if len(rows) > n else None)


def delete_user(rt: Runtime, tenant: str, user: str) -> Op[int]:
    # The user's row exclusively before any read (see tenancy.ensure_user).
    if not (yield from tenancy.lock_user(tenant, user)):
        raise NotFound(f"user {user} not found", kind="user")
    return (yield from rt.cascade.delete_user(tenant, user))
