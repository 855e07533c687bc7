"""Iteration logs (sans-IO): an append-only record of attempts at a task, per conversation."""

from __future__ import annotations

import json
from typing import Any

from memstrata.conversation.conversations import get_conversation, hold_conversation
from memstrata.domain.state import Iteration
from memstrata.errors import InvalidInput
from memstrata.runtime import Runtime, page_limit
from memstrata.state.checks import check_name, dump, open_doc, seal_doc, sized
from memstrata.storage.plan import Exec, Op, Query, Row
from memstrata.storage.records import from_micros
from memstrata.storage.sql import encode_cursor, seq_cursor
from memstrata.types import Page, Scope

__all__ = [
    "Iteration",
    "append_iteration",
    "iteration_row",
    "list_iterations",
    "open_iteration",
    "seal_iteration",
]


_IT_COLUMNS = "seq, conversation_id, task, attempt, outcome, error, detail, created_at"


def iteration_row(conversation_id: str, task: str, attempt: int, created_at: int) -> str:
    """What an attempt's sealed texts are bound to: its conversation, task, attempt and
    time (all stored in clear beside them; its seq is not known before the insert)."""
    return f"{conversation_id}/{task}/{attempt}/{created_at}"


def seal_iteration(
    scope: Scope, row: str, error: str | None, detail: str | None
) -> tuple[str | None, str | None]:
    """An attempt's error and detail (JSON text) as stored: sealed for the conversation's
    owner under encryption at rest (as they are when off)."""
    return (
        None if error is None else seal_doc("iteration_logs.error", row, scope, error),
        None if detail is None else seal_doc("iteration_logs.detail", row, scope, detail),
    )


def open_iteration(
    row: str, error: str | None, detail: str | None
) -> tuple[str | None, str | None]:
    """An attempt's stored error and detail opened (None each once the owner's key was
    destroyed: the attempt keeps its task and outcome, its texts read as absent)."""
    return open_doc("iteration_logs.error", row, error), open_doc(
        "iteration_logs.detail", row, detail
    )


def _to_iteration(row: Row) -> Iteration:
    seq, conversation_id, task, attempt, outcome, error, detail, created_at = row
    error, detail = open_iteration(
        iteration_row(conversation_id, task, attempt, created_at), error, detail
    )
    return Iteration(
        seq,
        conversation_id,
        task,
        attempt,
        outcome,
        error,
        {} if detail is None else json.loads(detail),
        from_micros(created_at),
    )


def append_iteration(
    rt: Runtime,
    scope: Scope,
    conversation_id: str,
    task: str,
    *,
    outcome: str,
    error: str | None = None,
    attempt: int | None = None,
    detail: dict[str, Any] | None = None,
) -> Op[Iteration]:
    """Log an attempt; ``attempt`` defaults to one more than the task's last."""
    check_name(task, "task")
    check_name(outcome, "outcome")
    if error is not None:
        sized(error, "error")
    yield from hold_conversation(scope, conversation_id)
    if attempt is None:
        rows = yield Query(
            "SELECT max(attempt) FROM iteration_logs WHERE conversation_id = ? AND task = ?",
            (conversation_id, task),
        )
        attempt = (rows[0][0] or 0) + 1
    elif attempt < 1:
        raise InvalidInput("attempt must be >= 1", field="attempt")
    now = rt.clock()
    texts = seal_iteration(
        scope,
        iteration_row(conversation_id, task, attempt, now),
        error,
        dump(detail) if detail else None,
    )
    yield Exec(
        "INSERT INTO iteration_logs (conversation_id, task, attempt, outcome, error, detail, "
        "created_at) VALUES (?, ?, ?, ?, ?, ?, ?)",
        (conversation_id, task, attempt, outcome, *texts, now),
    )
    rows = yield Query(
        f"SELECT {_IT_COLUMNS} FROM iteration_logs WHERE conversation_id = ? "
        "ORDER BY seq DESC LIMIT 1",
        (conversation_id,),
    )
    return _to_iteration(rows[0])


def list_iterations(
    rt: Runtime,
    scope: Scope,
    conversation_id: str,
    *,
    task: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Op[Page[Iteration]]:
    """Oldest first (the order a retry briefing reads them in)."""
    n = page_limit(rt, limit)
    after = seq_cursor(cursor) or 0
    yield from get_conversation(scope, conversation_id)
    sql = f"SELECT {_IT_COLUMNS} FROM iteration_logs WHERE conversation_id = ? AND seq > ?"
    params: list[Any] = [conversation_id, after]
    if task is not None:
        sql += " AND task = ?"
        params.append(task)
    rows = yield Query(sql + " ORDER BY seq LIMIT ?", (*params, n + 1))
    items = [_to_iteration(r) for r in rows[:n]]
    return Page(items, encode_cursor(items[-1].seq) if len(rows) > n else None)
