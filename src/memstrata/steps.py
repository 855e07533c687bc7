"""One driver for the package's sans-IO generators.

An operation is a generator that yields requests and receives each one's result (or has
the request's error thrown into it, so it may recover). SQL operations
(:mod:`memstrata.storage.plan`), blob operations (:mod:`memstrata.blobs`) and the
integrations' steps (:mod:`memstrata.integrations.langgraph._steps`) are all driven here;
each says how to execute a request and which errors go back into the operation.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator
from typing import Any, TypeVar

__all__ = ["adrive", "drive"]

T = TypeVar("T")
R = TypeVar("R")

#: What to throw into the operation for an error of ``execute``; raising propagates it.
Handle = Callable[[Exception], BaseException]


def drive(op: Generator[R, Any, T], execute: Callable[[R], Any], handle: Handle) -> T:
    """Run ``op`` to completion with a blocking ``execute``."""
    try:
        request = next(op)
        while True:
            try:
                result = execute(request)
            except Exception as exc:
                request = op.throw(handle(exc))
            else:
                request = op.send(result)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


async def adrive(
    op: Generator[R, Any, T], execute: Callable[[R], Awaitable[Any]], handle: Handle
) -> T:
    """:func:`drive` for an ``execute`` that is a coroutine (the same protocol)."""
    try:
        request = next(op)
        while True:
            try:
                result = await execute(request)
            except Exception as exc:
                request = op.throw(handle(exc))
            else:
                request = op.send(result)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]
