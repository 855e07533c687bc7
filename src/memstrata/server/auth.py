"""Who is calling: the API key on every request, and the scope it may act as.

A key found in the store is kept for ``Settings.key_cache_s`` seconds (see
:mod:`memstrata.server.keycache`): a key made by the CLI works at once, and a key revoked
or deleted elsewhere is refused within that time. The scope comes from the key
(and, for an admin key, from the ``X-Memstrata-User`` / ``X-Memstrata-Agent``
headers), never from a request body.
"""

from __future__ import annotations

import functools
from typing import Annotated, cast

import anyio.to_thread
from fastapi import Depends, Header, Request
from fastapi.security import HTTPAuthorizationCredentials, HTTPBearer

from memstrata.api import AsyncMemory
from memstrata.errors import Forbidden, InvalidInput, Unauthorized
from memstrata.server.keycache import KeyCache
from memstrata.server.ratelimit import AuthFailures, LocalBuckets, check
from memstrata.storage.tenancy import Principal
from memstrata.types import Scope

__all__ = [
    "AGENT_HEADER",
    "USER_HEADER",
    "AdminKey",
    "CallerScope",
    "Mem",
    "admin_principal",
    "authenticate",
    "get_memory",
    "scope_of",
    "user_scope",
]

USER_HEADER = "X-Memstrata-User"
AGENT_HEADER = "X-Memstrata-Agent"

_bearer = HTTPBearer(
    auto_error=False,
    scheme_name="apiKey",
    description="An API key (`msk_...`) from `memstrata keys create`.",
)


async def get_memory(request: Request) -> AsyncMemory:
    # async on purpose: FastAPI runs a plain ``def`` dependency in its thread pool, and the
    # hop there and back cost every request a few tenths of a millisecond for one lookup.
    return cast(AsyncMemory, request.app.state.memory)


Mem = Annotated[AsyncMemory, Depends(get_memory)]


async def principal(
    request: Request,
    mem: Mem,
    credentials: Annotated[HTTPAuthorizationCredentials | None, Depends(_bearer)],
) -> Principal:
    return await authenticate(
        request, mem, None if credentials is None else credentials.credentials
    )


async def authenticate(request: Request, mem: AsyncMemory, secret: str | None) -> Principal:
    """The key ``secret`` (the bearer token, None when none was sent) as a principal:
    failures limited per address, the key cache, the caller's rate limit."""
    if not secret:
        raise Unauthorized("send an API key as 'Authorization: Bearer <key>'")
    failures = getattr(request.app.state, "auth_failures", None)
    address = request.client.host if request.client is not None else "unknown"
    if isinstance(failures, AuthFailures):
        failures.check(address)  # before the lookup: a limited address costs the store nothing
    cache = getattr(request.app.state, "key_cache", None)
    found = cache.get(secret) if isinstance(cache, KeyCache) else None
    if found is None:
        found = await mem.keys.authenticate(secret)
        if found is None:
            if isinstance(failures, AuthFailures):
                failures.failed(address)
            raise Unauthorized("unknown or revoked API key")
        if isinstance(cache, KeyCache):
            cache.put(secret, found)
    limiter = getattr(request.app.state, "limiter", None)
    if isinstance(limiter, LocalBuckets):
        check(limiter, found.key_id)
    elif limiter is not None:  # Redis: a network call, kept off the event loop
        await anyio.to_thread.run_sync(check, limiter, found.key_id)
    return found


async def user_scope(
    caller: Annotated[Principal, Depends(principal)],
    user: Annotated[
        str | None,
        Header(
            alias=USER_HEADER,
            description="Admin keys only: the user to act as. A user key sending it gets 403.",
        ),
    ] = None,
    agent: Annotated[
        str | None,
        Header(
            alias=AGENT_HEADER,
            description="Admin keys only: the agent to act as (optional). A user key sending it gets 403.",
        ),
    ] = None,
) -> Scope:
    """The scope of a user route: the key's own user, or the user an admin key names."""
    return scope_of(caller, user, agent)


def scope_of(caller: Principal, user: str | None, agent: str | None) -> Scope:
    """:func:`user_scope` given the two headers' values."""
    if not caller.admin:
        if user is not None or agent is not None:
            raise Forbidden(
                f"a user key always acts as its own user; it may not send {USER_HEADER} "
                f"or {AGENT_HEADER}"
            )
        assert caller.user is not None  # a non-admin key always names its user
        return _own_scope(caller.tenant, caller.user)
    if user is None:
        raise InvalidInput(
            f"an admin key must name the user with the {USER_HEADER} header on this route",
            field=USER_HEADER,
        )
    return Scope(caller.tenant, user, agent)


@functools.lru_cache(maxsize=4096)
def _own_scope(tenant: str, user: str) -> Scope:
    # A user key's scope on every request it makes: built (and its names checked) once.
    return Scope(tenant, user)


async def admin_principal(caller: Annotated[Principal, Depends(principal)]) -> Principal:
    if not caller.admin:
        raise Forbidden("this route needs an admin key")
    return caller


async def user_or_tenant(
    caller: Annotated[Principal, Depends(principal)],
    user: Annotated[
        str | None,
        Header(alias=USER_HEADER, description="Admin keys: one user (default: the whole tenant)."),
    ] = None,
    agent: Annotated[str | None, Header(alias=AGENT_HEADER, include_in_schema=False)] = None,
) -> tuple[str, str | None]:
    """(tenant, user) for routes that read per user or per tenant (jobs, usage): a user
    key's own user; an admin key's named user, or its whole tenant (user None)."""
    if not caller.admin:
        if user is not None or agent is not None:
            raise Forbidden(f"a user key may not send {USER_HEADER} or {AGENT_HEADER}")
        return caller.tenant, caller.user
    if user is not None:
        Scope(caller.tenant, user)  # validates the name
    return caller.tenant, user


CallerScope = Annotated[Scope, Depends(user_scope)]
AdminKey = Annotated[Principal, Depends(admin_principal)]
UserOrTenant = Annotated[tuple[str, str | None], Depends(user_or_tenant)]
