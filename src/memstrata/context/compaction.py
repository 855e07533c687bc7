"""Rolling compaction (sans-IO): what a new summary would cover, storing it, and the log
of attempts. The summary itself is written by the caller between the two steps (an
LLM call or the extractive fallback), outside any transaction.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Any

from memstrata.context.summaries import (
    SUMMARY_COLUMNS,
    Summary,
    seal_summary,
    summary_for,
    to_summary,
)
from memstrata.context.windows import DEFAULT_WINDOW
from memstrata.conversation.branch import branch_chunk, resolve_leaf
from memstrata.conversation.conversations import get_conversation, hold_conversation
from memstrata.conversation.lookup import require_message
from memstrata.runtime import Runtime
from memstrata.storage.plan import Exec, Op, Query
from memstrata.storage.records import from_micros, to_message
from memstrata.types import Message, Role, Scope, Status

__all__ = [
    "MIN_NEW_TOKENS",
    "CompactionPlan",
    "compaction_log",
    "finish_compaction",
    "prepare_compaction",
    "record_compaction_failure",
]

MIN_NEW_TOKENS = 500  # n8n: do not compact fewer unsummarised tokens than this


@dataclass(frozen=True, slots=True)
class CompactionPlan:
    """What one compaction would cover; ``skip`` says why there is nothing to do."""

    conversation_id: str
    leaf_id: str | None
    previous: Summary | None
    messages: list[Message]
    skip: str | None = None

    @property
    def up_to(self) -> Message | None:
        return self.messages[-1] if self.messages else None


def prepare_compaction(
    rt: Runtime,
    scope: Scope,
    conversation_id: str,
    *,
    leaf_id: str | None = None,
    window: int = DEFAULT_WINDOW,
    min_tokens: int = MIN_NEW_TOKENS,
    keep_from: int | None = None,
) -> Op[CompactionPlan]:
    """The messages older than the last ``window`` that the current summary does not cover;
    with ``keep_from`` (a point of the branch in cumulative tokens: where a window that
    advances in steps starts next), the whole turns that start before it instead, however
    few (a step is ``min_tokens`` long at least, less the turn it cuts into)."""
    found = yield from resolve_leaf(scope, conversation_id, leaf_id)
    if found is None:
        return CompactionPlan(conversation_id, None, None, [], "the conversation is empty")
    leaf = found.message
    previous = yield from summary_for(conversation_id, leaf)
    start = 0 if previous is None else previous.up_to_depth + 1
    if keep_from is None and leaf.depth - start + 1 <= window:
        return CompactionPlan(
            conversation_id, leaf.id, previous, [], "nothing older than the window"
        )
    rows = yield from branch_chunk(conversation_id, leaf.id, leaf.depth - start + 1)
    path = [to_message(r) for r in reversed(rows)]
    if keep_from is None:
        body = path[: len(path) - window]
    else:
        body = [m for m in path if m.branch_tokens - m.token_count < keep_from][: len(path) - 1]
    # Never end the covered slice inside a turn: the window starts at a user message.
    while body and len(body) < len(path) and path[len(body)].role is not Role.USER:
        body.pop()
    body = [m for m in body if m.status is not Status.PENDING]
    new_tokens = sum(m.token_count for m in body)
    if new_tokens < (min_tokens if keep_from is None else 1):
        return CompactionPlan(
            conversation_id, leaf.id, previous, [], f"only {new_tokens} new tokens (< {min_tokens})"
        )
    return CompactionPlan(conversation_id, leaf.id, previous, body)


def finish_compaction(
    rt: Runtime, scope: Scope, plan: CompactionPlan, content: str, method: str
) -> Op[Summary]:
    """Store the new summary (the caller validated it) and log the success."""
    # Held until commit, so a delete racing the compaction leaves no summary behind.
    yield from hold_conversation(scope, plan.conversation_id)
    up_to = plan.up_to
    assert up_to is not None
    yield from require_message(plan.conversation_id, up_to.id)  # still there
    sid, now = rt.make_id(), rt.clock()
    prev = plan.previous
    yield Exec(
        f"INSERT INTO summaries ({SUMMARY_COLUMNS}) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            sid,
            plan.conversation_id,
            up_to.id,
            up_to.depth,
            up_to.branch_tokens,
            1 if prev is None else prev.version + 1,
            None if prev is None else prev.id,
            seal_summary(scope, sid, content),
            method,
            now,
        ),
    )
    yield from _log(plan.conversation_id, plan.leaf_id, "compacted", None, sid, now)
    rows = yield Query(f"SELECT {SUMMARY_COLUMNS} FROM summaries WHERE id = ?", (sid,))
    written = to_summary(rows[0])
    assert written is not None  # sealed just now with the owner's live key
    return written


def record_compaction_failure(
    rt: Runtime, scope: Scope, conversation_id: str, leaf_id: str | None, outcome: str, reason: str
) -> Op[None]:
    yield from hold_conversation(scope, conversation_id)
    yield from _log(conversation_id, leaf_id, outcome, reason[:2000], None, rt.clock())


def _log(
    cid: str, leaf_id: str | None, outcome: str, reason: str | None, sid: str | None, now: int
) -> Op[None]:
    yield Exec(
        "INSERT INTO compaction_log (conversation_id, leaf_id, outcome, reason, summary_id, "
        "created_at) VALUES (?, ?, ?, ?, ?, ?)",
        (cid, leaf_id, outcome, reason, sid, now),
    )


def compaction_log(scope: Scope, conversation_id: str, limit: int = 50) -> Op[list[dict[str, Any]]]:
    """The latest compaction attempts, newest first."""
    yield from get_conversation(scope, conversation_id)
    rows = yield Query(
        "SELECT seq, leaf_id, outcome, reason, summary_id, created_at FROM compaction_log "
        "WHERE conversation_id = ? ORDER BY seq DESC LIMIT ?",
        (conversation_id, limit),
    )
    return [
        {
            "leaf_id": leaf_id,
            "outcome": outcome,
            "reason": reason,
            "summary_id": summary_id,
            "created_at": from_micros(created_at).isoformat(),
        }
        for _seq, leaf_id, outcome, reason, summary_id, created_at in rows
    ]
