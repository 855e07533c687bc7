"""Sans-IO storage operations.

An operation is a generator that yields SQL requests and receives their results;
it never touches a connection. The same operation is driven by the sync driver
of a backend, by its async driver, and by the conformance suite, so the logic of
every read and write is written once::

    def count(cid: str) -> Op[int]:
        rows = yield Query("SELECT count(*) FROM messages WHERE conversation_id = ?", (cid,))
        return int(rows[0][0])

SQL is written in the subset that SQLite and PostgreSQL share, with ``?``
placeholders; a backend rewrites placeholders for its driver. An operation runs
inside one transaction; an exception raised inside it rolls everything back, so
nothing is ever half-written.
"""

from __future__ import annotations

from collections.abc import Awaitable, Callable, Generator, Sequence
from dataclasses import dataclass
from functools import partial
from typing import Any, Generic, Literal, Protocol, TypeVar

from memstrata import steps

__all__ = [
    "Exec",
    "Op",
    "Plan",
    "Query",
    "Request",
    "Row",
    "adrive",
    "aone_statement",
    "drive",
    "one_statement",
    "quick_read",
    "read",
    "write",
]

T = TypeVar("T")
Row = tuple[Any, ...]


@dataclass(frozen=True, slots=True)
class Query:
    """A statement whose rows are sent back as ``list[Row]``.

    ``lock="skip_locked"`` asks for the selected rows to be locked for this
    transaction, skipping rows another transaction holds (PostgreSQL appends
    ``FOR UPDATE SKIP LOCKED``). ``lock="share"`` and ``lock="update"`` lock the
    selected rows until commit, waiting for other holders (``FOR SHARE`` /
    ``FOR UPDATE``): a write under a parent row holds it shared, a delete of the
    parent holds it exclusively, so no write can land under a deleted parent.
    SQLite needs none of these, as its writers are serialised.
    """

    sql: str
    params: Sequence[Any] = ()
    lock: Literal["skip_locked", "share", "update"] | None = None


@dataclass(frozen=True, slots=True)
class Exec:
    """A statement whose affected-row count is sent back as ``int``."""

    sql: str
    params: Sequence[Any] = ()


Request = Query | Exec
Op = Generator[Request, Any, T]


@dataclass(frozen=True, slots=True)
class Plan(Generic[T]):
    """An operation factory plus whether it writes (decides the transaction kind).

    ``quick`` marks a read that is short and bounded (well under a millisecond on an
    embedded store, usually one statement): an engine may run it without a thread
    hand-off (SQLite, on the event loop) or first as one statement outside a transaction
    (PostgreSQL; a statement is atomic alone, and a read needing more starts over inside
    one).
    """

    make: Callable[[], Op[T]]
    writes: bool
    quick: bool = False


def read(make: Callable[[], Op[T]]) -> Plan[T]:
    return Plan(make, writes=False)


def quick_read(make: Callable[[], Op[T]]) -> Plan[T]:
    """A :func:`read` marked ``quick`` (see :class:`Plan`)."""
    return Plan(make, writes=False, quick=True)


def write(make: Callable[[], Op[T]]) -> Plan[T]:
    return Plan(make, writes=True)


class Cursor(Protocol):
    """What :func:`drive` needs from a connection: run one request."""

    def __call__(self, request: Request) -> Any: ...


def _translated(translate: Callable[[Exception], Exception], exc: Exception) -> Exception:
    """The memstrata error for ``exc``, with the driver's error kept as its cause (for the
    log; the REST edge never shows a client a message that repeats its cause)."""
    new = translate(exc)
    if new is not exc and new.__cause__ is None:
        new.__cause__ = exc
    return new


def drive(op: Op[T], execute: Cursor, translate: Callable[[Exception], Exception]) -> T:
    """Run ``op`` to completion with a blocking ``execute``.

    Driver errors are translated (``translate``) and thrown into the operation,
    so an operation may catch, say, a :class:`~memstrata.errors.Conflict` from a
    unique index and recover; an error it does not catch propagates.
    """
    return steps.drive(op, execute, partial(_translated, translate))


async def adrive(
    op: Op[T],
    execute: Callable[[Request], Awaitable[Any]],
    translate: Callable[[Exception], Exception],
) -> T:
    """:func:`drive` for a driver whose ``execute`` is a coroutine (the same protocol)."""
    return await steps.adrive(op, execute, partial(_translated, translate))


#: What :func:`one_statement` found: ``(True, result)``, or ``(False, None)`` (run it again).
Single = tuple[Literal[True], T] | tuple[Literal[False], None]


def one_statement(
    plan: Plan[T], execute: Cursor, translate: Callable[[Exception], Exception]
) -> Single[T]:
    """A quick read's first statement alone, outside a transaction (one statement sees one
    snapshot on both backends): ``(True, result)`` when that was all the read needed, else
    ``(False, None)`` and the caller runs the plan again in a transaction, so a read of
    several statements still sees one snapshot. Saves BEGIN and COMMIT."""
    op = plan.make()
    try:
        request = next(op)
        try:
            result = execute(request)
        except Exception as exc:
            op.throw(_translated(translate, exc))
        else:
            op.send(result)
    except StopIteration as stop:
        return True, stop.value
    op.close()
    return False, None


async def aone_statement(
    plan: Plan[T],
    execute: Callable[[Request], Awaitable[Any]],
    translate: Callable[[Exception], Exception],
) -> Single[T]:
    """:func:`one_statement` with an ``execute`` that is a coroutine."""
    op = plan.make()
    try:
        request = next(op)
        try:
            result = await execute(request)
        except Exception as exc:
            op.throw(_translated(translate, exc))
        else:
            op.send(result)
    except StopIteration as stop:
        return True, stop.value
    op.close()
    return False, None
