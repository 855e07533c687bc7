"""Write an integration's logic once for the sync and the async facade.

A step is a generator that yields :class:`Call` requests (``memory.<path>(...)``,
the same path on :class:`~memstrata.Memory` and :class:`~memstrata.AsyncMemory`), or
:class:`Local` ones (a function with a sync and an async form, such as an embedding
model's), and receives each reply, or has the call's exception thrown into it, so it may
catch, say, :class:`~memstrata.errors.NotFound`. :func:`run_sync` and
:func:`run_async` drive it on one facade or the other.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar, cast

from memstrata.api import AsyncMemory, Memory

__all__ = ["Call", "Local", "Steps", "call", "run_async", "run_sync"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Call:
    """Call ``memory.<path>(*args, **kwargs)``."""

    path: str
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Local:
    """Call ``sync(*args)`` on the sync facade, ``await async_(*args)`` on the async one."""

    sync: Callable[..., Any]
    async_: Callable[..., Awaitable[Any]]
    args: tuple[Any, ...] = ()


Steps = Generator[Call | Local, Any, T]


def call(path: str, *args: Any, **kwargs: Any) -> Call:
    return Call(path, args, kwargs)


def _resolve(memory: Memory | AsyncMemory, path: str) -> Any:
    target: Any = memory
    for part in path.split("."):
        target = getattr(target, part)
    return target


def run_sync(memory: Memory, steps: Steps[T]) -> T:
    reply: Any = None
    error: Exception | None = None
    while True:
        try:
            request = steps.send(reply) if error is None else steps.throw(error)
        except StopIteration as done:
            return cast(T, done.value)
        reply, error = None, None
        try:
            if isinstance(request, Local):
                reply = request.sync(*request.args)
            else:
                reply = _resolve(memory, request.path)(*request.args, **request.kwargs)
        except Exception as exc:  # handed to the step, which may expect it (NotFound)
            error = exc


async def run_async(memory: AsyncMemory, steps: Steps[T]) -> T:
    reply: Any = None
    error: Exception | None = None
    while True:
        try:
            request = steps.send(reply) if error is None else steps.throw(error)
        except StopIteration as done:
            return cast(T, done.value)
        reply, error = None, None
        try:
            if isinstance(request, Local):
                reply = await request.async_(*request.args)
            else:
                reply = await _resolve(memory, request.path)(*request.args, **request.kwargs)
        except Exception as exc:
            error = exc
