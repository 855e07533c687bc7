"""``one_statement``: a quick read's first statement alone; a read that needs a second
statement is given up (its generator closed) so the engine reruns it in a transaction."""

from __future__ import annotations

from typing import Any

import pytest

from memstrata.errors import BackendUnavailable
from memstrata.storage.plan import Op, Query, Request, one_statement, quick_read


def _one() -> Op[list[Any]]:
    rows: list[Any] = yield Query("SELECT 1")
    return rows


closed: list[bool] = []


def _two() -> Op[int]:
    try:
        yield Query("SELECT 1")
        yield Query("SELECT 2")
    except GeneratorExit:
        closed.append(True)
        raise
    return 2


def test_a_read_of_one_statement_is_answered_by_it() -> None:
    sent: list[str] = []

    def execute(request: Request) -> Any:
        sent.append(request.sql)
        return [(1,)]

    assert one_statement(quick_read(_one), execute, lambda e: e) == (True, [(1,)])
    assert sent == ["SELECT 1"]


def test_a_read_of_two_statements_is_given_up_after_the_first() -> None:
    sent: list[str] = []

    def execute(request: Request) -> Any:
        sent.append(request.sql)
        return []

    assert one_statement(quick_read(_two), execute, lambda e: e) == (False, None)
    assert sent == ["SELECT 1"]
    assert closed == [True]


def test_an_error_of_the_statement_reaches_the_read_translated() -> None:
    def execute(request: Request) -> Any:
        raise OSError("connection lost")

    def translate(exc: Exception) -> Exception:
        return BackendUnavailable("down")

    with pytest.raises(BackendUnavailable) as raised:
        one_statement(quick_read(_one), execute, translate)
    assert isinstance(raised.value.__cause__, OSError)
