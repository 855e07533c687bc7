"""A memory bound to one scope: ``mem.scoped(scope)``.

Every call of the facade names its scope first; a bound memory fills it in::

    alice = mem.scoped(Scope("acme", "alice"))
    conv = alice.conversations.create(title="Trip")
    alice.messages.append(conv.id, role="user", content="Hi")
    alice.history(conv.id)

One class serves ``Memory``, ``AsyncMemory`` and the remote clients alike: it binds the
scope to every method whose first parameter is ``scope`` (sub-APIs included) and passes
everything else through, so an async method stays a coroutine function and a new method
is bound the day it is added. Methods that take no scope (``jobs.register``,
``keys.create``) are passed through unchanged.
"""

from __future__ import annotations

import functools
import inspect
from collections.abc import Callable
from typing import Any

from memstrata.types import Scope

__all__ = ["Scoped"]

_PASS_THROUGH = frozenset({"core", "url", "scoped"})


def _takes_scope(method: Callable[..., Any]) -> bool:
    try:
        params = list(inspect.signature(method).parameters.values())
    except (TypeError, ValueError):  # builtins without a signature
        return False
    return bool(params) and params[0].name == "scope"


def _bind(value: Any, scope: Scope) -> Any:
    if inspect.ismethod(value) or inspect.isfunction(value):
        return functools.partial(value, scope) if _takes_scope(value) else value
    if type(value).__module__.startswith("memstrata.") and not isinstance(value, Scope):
        return _BoundApi(value, scope)
    return value


class _BoundApi:
    """One sub-API (``messages``, ``facts``, ...) with the scope filled in."""

    def __init__(self, api: Any, scope: Scope) -> None:
        self._api = api
        self._scope = scope

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._api, name)
        if inspect.ismethod(value) and _takes_scope(value):
            return functools.partial(value, self._scope)
        return value

    def __repr__(self) -> str:
        return f"{type(self._api).__name__}(scope={self._scope})"


class Scoped:
    """``memory`` with ``scope`` bound: the same calls, without the scope argument."""

    def __init__(self, memory: Any, scope: Any) -> None:
        if not isinstance(scope, Scope):  # callers outside typed code pass anything
            from memstrata.errors import InvalidInput

            raise InvalidInput("scoped() takes a Scope", field="scope")
        self._memory = memory
        self.scope = scope

    @property
    def memory(self) -> Any:
        """The unbound memory (for calls about other scopes, or none)."""
        return self._memory

    def __getattr__(self, name: str) -> Any:
        value = getattr(self._memory, name)
        if name in _PASS_THROUGH or name.startswith("_"):
            return value
        return _bind(value, self.scope)

    def __repr__(self) -> str:
        return f"Scoped({type(self._memory).__name__}, {self.scope})"
