"""Who a model call is made for: a context variable the job runner and the facade set.

A model call (an LLM completion, an embedding) happens deep inside a feature that
does not know, and should not be told, whom it is spending for. The scope reaches
the meter the way a request id reaches a log record: :func:`usage_scope` binds
``(tenant, user, agent, purpose, job)`` for the duration of a job or a facade call,
and the metered wrappers read it when they record. A context variable follows
``await`` and ``anyio.to_thread`` (both copy the context), so the async facade's
calls are attributed like the sync one's, and two requests served at once never
see each other's scope. A call made outside any bound scope is recorded as
unattributed (tenant ``""``), never dropped.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable, Iterator
from contextlib import AbstractContextManager, contextmanager, nullcontext
from contextvars import ContextVar
from dataclasses import dataclass, replace
from typing import Any, ParamSpec, TypeVar

__all__ = ["CallScope", "attributed", "current_scope", "usage_purpose", "usage_scope"]

P = ParamSpec("P")
T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class CallScope:
    """Whom calls are made for; ``purpose`` None lets each call name its own."""

    tenant: str = ""
    user: str = ""
    agent: str = ""
    purpose: str | None = None
    job_id: str | None = None


_SCOPE: ContextVar[CallScope | None] = ContextVar("memstrata_usage_scope", default=None)


def current_scope() -> CallScope | None:
    return _SCOPE.get()


@contextmanager
def usage_scope(
    tenant: str,
    user: str | None,
    agent: str | None = None,
    *,
    purpose: str | None = None,
    job_id: str | None = None,
) -> Iterator[CallScope]:
    """Attribute the model calls made inside to this owner. An inner scope keeps the
    outer purpose and job unless it names its own (a job's handler calling the facade
    stays that job's)."""
    outer = _SCOPE.get()
    bound = CallScope(
        tenant,
        user or "",
        agent or "",
        purpose if purpose is not None else (outer.purpose if outer else None),
        job_id if job_id is not None else (outer.job_id if outer else None),
    )
    token = _SCOPE.set(bound)
    try:
        yield bound
    finally:
        _SCOPE.reset(token)


@contextmanager
def usage_purpose(purpose: str) -> Iterator[None]:
    """Name the purpose of the calls made inside (e.g. ``query`` for a query's embedding),
    keeping the bound owner."""
    token = _SCOPE.set(replace(_SCOPE.get() or CallScope(), purpose=purpose))
    try:
        yield
    finally:
        _SCOPE.reset(token)


def _scope_arg(fn: Callable[..., Any]) -> Callable[[tuple[Any, ...], dict[str, Any]], Any]:
    """How to find the ``scope`` argument of ``fn`` in a call's arguments (its position is
    found once: this runs on every context assembly)."""
    names = list(inspect.signature(fn).parameters)
    at = names.index("scope") if "scope" in names else -1

    def find(args: tuple[Any, ...], kwargs: dict[str, Any]) -> Any:
        if 0 <= at < len(args):
            return args[at]
        return kwargs.get("scope")

    return find


def attributed(fn: Callable[P, T]) -> Callable[P, T]:
    """Decorate a facade method taking ``scope``: model calls made while it runs are
    attributed to that scope. Works on plain and ``async`` methods alike (the sync
    facade is generated from the async one)."""
    find = _scope_arg(fn)

    def bind(args: tuple[Any, ...], kwargs: dict[str, Any]) -> AbstractContextManager[Any]:
        scope = find(args, kwargs)
        tenant = getattr(scope, "tenant", None)
        if not isinstance(tenant, str):
            return nullcontext()
        return usage_scope(tenant, getattr(scope, "user", None), getattr(scope, "agent", None))

    if inspect.iscoroutinefunction(fn):

        @functools.wraps(fn)
        async def run_async(*args: Any, **kwargs: Any) -> Any:
            with bind(args, kwargs):
                return await fn(*args, **kwargs)

        return run_async  # type: ignore[return-value]

    @functools.wraps(fn)
    def run(*args: P.args, **kwargs: P.kwargs) -> T:
        with bind(args, kwargs):
            return fn(*args, **kwargs)

    return run
