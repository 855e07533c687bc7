"""JSON answers of the REST server rebuilt as the types the embedded API returns.

Each function reads one ``to_dict()`` shape back. Fields the server does not send
are filled from what the caller already knows (the scope's tenant and user) or left
at their neutral value (a job's lease); :func:`parse` turns an answer of another
shape into a :class:`~memstrata.errors.MemstrataError` instead of a KeyError.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any, TypeVar

from memstrata.client._results import (
    HistoryMessage,
    RemoteContext,
    RemoteHistory,
    RemoteNodeHistory,
)
from memstrata.context import ContextReport, TierReport
from memstrata.context.kit import CompactionResult
from memstrata.errors import MemstrataError
from memstrata.jobs.ops import Job, JobStatus
from memstrata.longterm.model import (
    Fact,
    FactEvent,
    FactOrigin,
    FactSource,
    FactStatus,
    ProfileSection,
)
from memstrata.nodes.layout import Turn
from memstrata.recall.service import RecallHit
from memstrata.state import Checkpoint, Iteration, PlanDoc, RunSnapshot, WorkingMemory
from memstrata.types import (
    Conversation,
    FileRef,
    Message,
    Page,
    Role,
    Scope,
    Status,
    ToolCall,
)

__all__ = [
    "checkpoint",
    "context",
    "conversation",
    "fact",
    "fact_event",
    "history",
    "items",
    "iteration",
    "job",
    "message",
    "node_history",
    "page",
    "parse",
    "plan",
    "profile",
    "recall_hit",
    "snapshot",
    "turn",
    "user",
    "working",
]

T = TypeVar("T")


def parse(decode: Callable[[Any], T], data: Any) -> T:
    try:
        return decode(data)
    except (KeyError, TypeError, ValueError, AttributeError) as exc:
        raise MemstrataError(
            f"the server's answer has an unexpected shape ({type(exc).__name__}: {exc}); "
            "is it a memstrata server of this version?"
        ) from None


def _dt(value: Any) -> datetime:
    return datetime.fromisoformat(value)


def _opt_dt(value: Any) -> datetime | None:
    return None if value is None else datetime.fromisoformat(value)


def page(decode: Callable[[Any], T]) -> Callable[[Any], Page[T]]:
    return lambda d: Page([decode(i) for i in d["items"]], d.get("next_cursor"))


def items(decode: Callable[[Any], T]) -> Callable[[Any], list[T]]:
    return lambda d: [decode(i) for i in d["items"]]


def _files(values: Any) -> tuple[FileRef, ...]:
    return tuple(FileRef.model_validate(f) for f in values or ())


def _tool_calls(values: Any) -> tuple[ToolCall, ...]:
    return tuple(ToolCall.model_validate(c) for c in values or ())


def message(d: Any) -> Message:
    return Message(
        id=d["id"],
        conversation_id=d["conversation_id"],
        parent_id=d["parent_id"],
        role=Role(d["role"]),
        content=d["content"],
        files=_files(d["files"]),
        tool_calls=_tool_calls(d["tool_calls"]),
        tool_call_id=d["tool_call_id"],
        status=Status(d["status"]),
        metadata=dict(d["metadata"]),
        occurred_at=_dt(d["occurred_at"]),
        created_at=_dt(d["created_at"]),
        seq=int(d["seq"]),
        depth=int(d["depth"]),
        token_count=int(d["token_count"]),
        branch_tokens=int(d["branch_tokens"]),
    )


def conversation(scope: Scope) -> Callable[[Any], Conversation]:
    """A conversation of ``scope`` (the answer does not repeat its tenant and user)."""

    def decode(d: Any) -> Conversation:
        return Conversation(
            id=d["id"],
            tenant=scope.tenant,
            user=scope.user,
            agent=d["agent"],
            title=d["title"],
            metadata=dict(d["metadata"]),
            active_leaf_id=d["active_leaf_id"],
            created_at=_dt(d["created_at"]),
            updated_at=_dt(d["updated_at"]),
            message_count=int(d["message_count"]),
        )

    return decode


def _history_message(d: Any) -> HistoryMessage:
    return HistoryMessage(
        id=d["id"],
        role=Role(d["role"]),
        content=d["content"],
        files=_files(d["files"]),
        tool_calls=_tool_calls(d["tool_calls"]),
        tool_call_id=d["tool_call_id"],
    )


def _history_body(d: Any, leaf_id: str | None) -> RemoteHistory:
    return RemoteHistory(
        leaf_id=leaf_id,
        messages=[_history_message(m) for m in d["messages"]],
        tokens=int(d["tokens"]),
        truncated=bool(d["truncated"]),
        over_budget=bool(d["over_budget"]),
    )


def history(d: Any) -> RemoteHistory:
    return _history_body(d, d["leaf_id"])


def node_history(d: Any) -> RemoteNodeHistory:
    return RemoteNodeHistory(d["current_message_id"], _history_body(d, None))


def _report(d: Any) -> ContextReport:
    return ContextReport(
        budget=int(d["budget"]),
        encoding=d["encoding"],
        leaf_id=d["leaf_id"],
        tiers={
            name: TierReport(int(t["asked"]), int(t["granted"]), int(t["items"]), t.get("reason"))
            for name, t in d["tiers"].items()
        },
        dropped=list(d["dropped"]),
        total=int(d["total"]),
        over_budget=bool(d["over_budget"]),
        newest_turn_over_budget=bool(d["newest_turn_over_budget"]),
        summary_id=d["summary_id"],
        covered_up_to=d["covered_up_to"],
        compaction_due=bool(d["compaction_due"]),
        hash=d["hash"],
    )


def context(d: Any) -> RemoteContext:
    return RemoteContext(list(d["messages"]), _report(d["report"]))


def recall_hit(d: Any) -> RecallHit:
    return RecallHit(
        message=message(d["message"]),
        conversation_id=d["conversation_id"],
        score=float(d["score"]),
        provenance=tuple(d["provenance"]),
        neighbour_of=d.get("neighbour_of"),
    )


def fact(d: Any) -> Fact:
    return Fact(
        id=d["id"],
        content=d["content"],
        category=d["category"],
        confidence=float(d["confidence"]),
        status=FactStatus(d["status"]),
        origin=FactOrigin(d["origin"]),
        agent=d["agent"],
        superseded_by=d["superseded_by"],
        source_error=d["source_error"],
        reason=d["reason"],
        sources=tuple(FactSource(s["conversation_id"], s["message_id"]) for s in d["sources"]),
        created_at=_dt(d["created_at"]),
        updated_at=_dt(d["updated_at"]),
    )


def fact_event(d: Any) -> FactEvent:
    return FactEvent(
        fact_id=d["fact_id"],
        event=d["event"],
        content=d["content"],
        category=d["category"],
        confidence=float(d["confidence"]),
        reason=d["reason"],
        related_id=d["related_id"],
        at=_dt(d["at"]),
    )


def profile(d: Any) -> list[ProfileSection]:
    return [
        ProfileSection(name, s["summary"], _opt_dt(s["updated_at"]))
        for name, s in d["sections"].items()
    ]


def working(d: Any) -> WorkingMemory:
    return WorkingMemory(
        conversation_id=d["conversation_id"],
        format="json" if d["format"] == "json" else "markdown",
        content=d["content"],
        json_schema=d["json_schema"],
        template=d["template"],
        version=int(d["version"]),
        updated_at=_dt(d["updated_at"]),
    )


def plan(d: Any) -> PlanDoc:
    return PlanDoc(d["conversation_id"], d["document"], int(d["version"]), _dt(d["updated_at"]))


def iteration(d: Any) -> Iteration:
    return Iteration(
        seq=int(d["seq"]),
        conversation_id=d["conversation_id"],
        task=d["task"],
        attempt=int(d["attempt"]),
        outcome=d["outcome"],
        error=d["error"],
        detail=dict(d["detail"]),
        created_at=_dt(d["created_at"]),
    )


def checkpoint(d: Any) -> Checkpoint:
    return Checkpoint(
        name=d["name"],
        run_id=d["run_id"],
        conversation_id=d["conversation_id"],
        state=d["state"],
        expires_at=_opt_dt(d["expires_at"]),
        created_at=_dt(d["created_at"]),
        updated_at=_dt(d["updated_at"]),
    )


def snapshot(d: Any) -> RunSnapshot:
    return RunSnapshot(
        d["conversation_id"], d["run_id"], d["data"], _dt(d["created_at"]), _dt(d["updated_at"])
    )


def job(tenant: str) -> Callable[[Any], Job]:
    """A job of ``tenant`` (the answer leaves out the tenant and the worker's lease)."""

    def decode(d: Any) -> Job:
        return Job(
            id=d["id"],
            kind=d["kind"],
            key=d["key"],
            tenant=tenant,
            user=d["user"],
            agent=d["agent"],
            conversation_id=d["conversation_id"],
            payload=dict(d["payload"]),
            flags=dict(d["flags"]),
            status=JobStatus(d["status"]),
            attempts=int(d["attempts"]),
            max_attempts=int(d["max_attempts"]),
            run_after=_dt(d["run_after"]),
            first_enqueued_at=_dt(d["first_enqueued_at"]),
            enqueue_count=int(d["enqueue_count"]),
            lease_token=None,
            worker=None,
            last_error=d["last_error"],
            created_at=_dt(d["created_at"]),
            updated_at=_dt(d["updated_at"]),
            finished_at=_opt_dt(d["finished_at"]),
            request_id=d.get("request_id"),
        )

    return decode


def turn(d: Any) -> Turn:
    return Turn(
        uid=d["uid"],
        message_id=d["message_id"],
        parent_message_id=d["parent_message_id"],
        user_content=d["user_content"],
        user_files=_files(d["user_files"]),
        assistant_content=d["assistant_content"],
        assistant_files=_files(d["assistant_files"]),
        created_at=int(d["created_at"]),
    )


def user(d: Any) -> tuple[str, datetime]:
    return d["id"], _dt(d["created_at"])


def compaction(d: Any) -> CompactionResult:
    return CompactionResult(d["outcome"], d.get("reason"), d.get("summary"))
