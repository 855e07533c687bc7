"""Wire models of context assembly and compaction."""

from __future__ import annotations

from datetime import datetime
from typing import Annotated, Any

from pydantic import Field, WithJsonSchema

from memstrata.domain.context import (
    CacheReport,
    CompactionResult,
    Context,
    ContextReport,
    Summary,
    TierReport,
)
from memstrata.wire._codec import Attr, OmitNone, Wire

__all__ = [
    "CacheReportOut",
    "CompactionOut",
    "ContextOut",
    "ContextReportOut",
    "SummaryOut",
    "TierReportOut",
]


class TierReportOut(Wire):
    __domain__ = TierReport

    asked: int
    granted: int
    items: int
    reason: Annotated[str | None, OmitNone] = None
    pending: Annotated[
        int | None,
        OmitNone,
        Field(
            description="Recall only: the caller's messages not yet searchable by meaning "
            "(past the read's embedding bound; found by keywords meanwhile)."
        ),
    ] = None


class CacheReportOut(Wire):
    __domain__ = CacheReport

    prefix_tokens: int = Field(
        description="Tokens of the leading whole messages identical to the previous context "
        "of the same branch (0 on the first): what a provider's prompt cache can serve."
    )
    breakpoint: int | None = Field(
        description="Index in `messages` of the last message of the stable part (null: none), "
        "where a cache marker goes (Anthropic's `cache_control`)."
    )


class ContextReportOut(Wire):
    __domain__ = ContextReport

    budget: int
    total: int
    encoding: str
    leaf_id: str | None
    tiers: dict[str, TierReportOut]
    dropped: list[dict[str, Any]]
    over_budget: bool
    newest_turn_over_budget: bool
    summary_id: str | None
    covered_up_to: str | None
    compaction_due: bool
    hash: str
    cache: CacheReportOut
    layout: str = Field(description="The order of the messages: `cache` or `classic`.")


# One message of a context, as ``Context.to_openai()`` gives it: the messages cross as
# they are, this states their shape in the schema (Role and ToolCall are components of
# the document: messages carry them too).
_CHAT_MESSAGE: dict[str, Any] = {
    "type": "object",
    "properties": {
        "role": {"$ref": "#/components/schemas/Role"},
        "content": {
            "anyOf": [
                {"type": "string"},
                {"type": "array", "items": {"type": "object", "additionalProperties": True}},
                {"type": "null"},
            ],
            "description": "Text; content parts for a user message with files; null for an "
            "assistant message with tool calls only.",
        },
        "tool_calls": {"type": "array", "items": {"$ref": "#/components/schemas/ToolCall"}},
        "tool_call_id": {"anyOf": [{"type": "string"}, {"type": "null"}]},
    },
    "required": ["role", "content"],
}


class ContextOut(Wire):
    __domain__ = Context

    messages: Annotated[
        list[dict[str, Any]], WithJsonSchema({"type": "array", "items": _CHAT_MESSAGE})
    ]
    report: ContextReportOut
    context_id: Annotated[str | None, OmitNone] = Field(
        default=None,
        description="The context record's id when the assembly was recorded (record: true); "
        "send it as `context_id` when appending the reply.",
    )


class SummaryOut(Wire):
    __domain__ = Summary

    id: str
    conversation_id: str
    up_to_message_id: Annotated[str, Attr("up_to_id")]
    up_to_depth: int
    version: int
    previous_id: str | None
    content: str
    method: str
    created_at: datetime


class CompactionOut(Wire):
    """The remote client reads the summary back as the JSON object it was sent as: the
    wire lacks what a :class:`Summary` holds (its branch token count)."""

    __domain__ = CompactionResult

    outcome: str
    reason: str | None
    summary: SummaryOut | None
