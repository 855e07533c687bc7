"""Write an integration's logic once for the sync and the async facade.

A step is a generator that yields :class:`Call` requests (a facade method, picked the
same way on :class:`~memstrata.Memory` and :class:`~memstrata.AsyncMemory`), or
:class:`Local` ones (a function with a sync and an async form, such as an embedding
model's), and receives each reply, or has the call's exception thrown into it, so it may
catch, say, :class:`~memstrata.errors.NotFound`. :func:`run_sync` and
:func:`run_async` drive it on one facade or the other, with the package's one driver
(:mod:`memstrata.steps`).
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Mapping
from dataclasses import dataclass, field
from typing import Any, TypeVar

from memstrata.api import AsyncMemory, Memory
from memstrata.steps import adrive, drive

__all__ = ["Call", "Local", "Steps", "call", "run_async", "run_sync"]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class Call:
    """Call ``method(memory)(*args, **kwargs)``: ``method`` picks the facade method
    (``lambda m: m.facts.add``), the same on :class:`~memstrata.Memory` and
    :class:`~memstrata.AsyncMemory`, so a misspelt one fails type checking."""

    method: Callable[[Memory | AsyncMemory], Callable[..., Any]]
    args: tuple[Any, ...] = ()
    kwargs: Mapping[str, Any] = field(default_factory=dict)


@dataclass(frozen=True, slots=True)
class Local:
    """Call ``sync(*args)`` on the sync facade, ``await async_(*args)`` on the async one."""

    sync: Callable[..., Any]
    async_: Callable[..., Awaitable[Any]]
    args: tuple[Any, ...] = ()


Steps = Generator[Call | Local, Any, T]


def call(
    method: Callable[[Memory | AsyncMemory], Callable[..., Any]], *args: Any, **kwargs: Any
) -> Call:
    return Call(method, args, kwargs)


def _to_step(exc: Exception) -> BaseException:
    return exc  # every error goes to the step, which may expect it (NotFound)


def run_sync(memory: Memory, steps: Steps[T]) -> T:
    def execute(request: Call | Local) -> Any:
        if isinstance(request, Local):
            return request.sync(*request.args)
        return request.method(memory)(*request.args, **request.kwargs)

    return drive(steps, execute, _to_step)


async def run_async(memory: AsyncMemory, steps: Steps[T]) -> T:
    async def execute(request: Call | Local) -> Any:
        if isinstance(request, Local):
            return await request.async_(*request.args)
        return await request.method(memory)(*request.args, **request.kwargs)

    return await adrive(steps, execute, _to_step)
