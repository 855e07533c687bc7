"""JSON answers of the REST server rebuilt as the types the embedded API returns.

Each decoder comes from the resource's wire model (:mod:`memstrata.wire`). Fields the
server does not send are filled from what the caller already knows (the scope's tenant
and user) or left at their neutral value (a job's lease); :func:`parse` turns an answer
of another shape into a :class:`~memstrata.errors.MemstrataError` instead of a KeyError.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from functools import partial
from typing import Any, TypeVar

from memstrata.client._values import (
    HistoryMessage,
    RemoteContext,
    RemoteHistory,
    RemoteNodeHistory,
)
from memstrata.domain.context import CompactionResult
from memstrata.domain.jobs import Job
from memstrata.domain.longterm import Fact, FactEvent, ProfileSection
from memstrata.domain.nodes import Turn
from memstrata.domain.recall import Explanation, RecallHit, RecallResults
from memstrata.domain.receipts import Receipt
from memstrata.domain.state import Checkpoint, Iteration, PlanDoc, RunSnapshot, WorkingMemory
from memstrata.errors import MemstrataError
from memstrata.types import Conversation, Message, Page, Scope
from memstrata.wire.context import ContextOut
from memstrata.wire.conversations import ConversationOut, HistoryOut, MessageOut, UserOut
from memstrata.wire.jobs import JobOut
from memstrata.wire.longterm import FactEventOut, FactOut, ProfileSectionOut
from memstrata.wire.nodes import NodeHistoryOut, TurnOut
from memstrata.wire.recall import ExplanationOut, HitOut
from memstrata.wire.receipts import ReceiptOut
from memstrata.wire.state import CheckpointOut, IterationOut, PlanOut, SnapshotOut, WorkingMemoryOut

__all__ = [
    "checkpoint",
    "compaction",
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
    "recall_results",
    "receipt",
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


def page(decode: Callable[[Any], T]) -> Callable[[Any], Page[T]]:
    return lambda d: Page([decode(i) for i in d["items"]], d.get("next_cursor"))


def items(decode: Callable[[Any], T]) -> Callable[[Any], list[T]]:
    return lambda d: [decode(i) for i in d["items"]]


message: Callable[[Any], Message] = MessageOut.decoder()
history: Callable[[Any], RemoteHistory] = HistoryOut.decoder(RemoteHistory, messages=HistoryMessage)
_node_history = NodeHistoryOut.decoder(RemoteHistory, messages=HistoryMessage)
context: Callable[[Any], RemoteContext] = ContextOut.decoder(RemoteContext)
recall_hit: Callable[[Any], RecallHit] = HitOut.decoder()
_explanation: Callable[[Any], Explanation] = ExplanationOut.decoder()


def recall_results(d: Any) -> RecallResults:
    return RecallResults(
        [recall_hit(x) for x in d["hits"]],
        pending=int(d.get("pending") or 0),
        explained=[_explanation(x) for x in d.get("explained") or []],
    )


fact: Callable[[Any], Fact] = FactOut.decoder()
fact_event: Callable[[Any], FactEvent] = FactEventOut.decoder()
working: Callable[[Any], WorkingMemory] = WorkingMemoryOut.decoder()
plan: Callable[[Any], PlanDoc] = PlanOut.decoder()
iteration: Callable[[Any], Iteration] = IterationOut.decoder()
checkpoint: Callable[[Any], Checkpoint] = CheckpointOut.decoder()
snapshot: Callable[[Any], RunSnapshot] = SnapshotOut.decoder()
turn: Callable[[Any], Turn] = TurnOut.decoder()
receipt: Callable[[Any], Receipt] = ReceiptOut.decoder()
user: Callable[[Any], tuple[str, datetime]] = UserOut.decoder(
    lambda id, created_at: (id, created_at)
)


def conversation(scope: Scope) -> Callable[[Any], Conversation]:
    """A conversation of ``scope`` (the answer does not repeat its tenant and user)."""
    return partial(ConversationOut.decoder(), tenant=scope.tenant, user=scope.user)


def job(tenant: str) -> Callable[[Any], Job]:
    """A job of ``tenant`` (the answer leaves out the tenant and the worker's lease)."""
    return partial(JobOut.decoder(), tenant=tenant, lease_token=None, worker=None)


def node_history(d: Any) -> RemoteNodeHistory:
    return RemoteNodeHistory(d["current_message_id"], _node_history(d, leaf_id=None))


def profile(d: Any) -> list[ProfileSection]:
    section = ProfileSectionOut.decoder()
    return [section(s, name=name) for name, s in d["sections"].items()]


def compaction(d: Any) -> CompactionResult:
    # The summary stays the dict it was sent as: the wire lacks what a Summary holds.
    return CompactionResult(d["outcome"], d.get("reason"), d.get("summary"))
