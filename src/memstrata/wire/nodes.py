"""Wire models of node memory: a turn, and a node's history."""

from __future__ import annotations

from pydantic import Field

from memstrata.domain.nodes import NodeHistory, Turn
from memstrata.types import FileRef
from memstrata.wire._codec import Wire
from memstrata.wire.conversations import HistoryMessageOut

__all__ = ["NodeHistoryOut", "TurnOut"]


class TurnOut(Wire):
    __domain__ = Turn

    uid: str
    message_id: str
    parent_message_id: str | None
    user_content: str
    user_files: list[FileRef]
    assistant_content: str
    assistant_files: list[FileRef]
    created_at: int = Field(description="Microseconds since the epoch.")
    revision: str | None = Field(
        default=None,
        description="Set when the turn replaced the message's earlier turns (the id of "
        "the flush that wrote it); null for a message's first turns.",
    )


class NodeHistoryOut(Wire):
    __domain__ = NodeHistory

    current_message_id: str | None
    messages: list[HistoryMessageOut]
    tokens: int
    truncated: bool = Field(description="Older turns were left out to fit the budget.")
    over_budget: bool = Field(description="The newest turn alone is over max_tokens.")
