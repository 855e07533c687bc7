"""What operations need besides SQL: the store's tokenizer, limits, clock, cascade."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from typing import TYPE_CHECKING

from memstrata.errors import InvalidInput
from memstrata.ids import new_id
from memstrata.storage.cascade import Cascade
from memstrata.storage.sql import now_micros
from memstrata.tokens import Tokenizer

if TYPE_CHECKING:
    from memstrata.storage.plan import Op
    from memstrata.types import Message, Scope

__all__ = ["BranchHook", "Limits", "MessageHook", "Runtime", "page_limit"]

#: Runs inside the transaction that stored a complete message (appended, or a pending one
#: completed), so data derived from it (e.g. recall's keyword index) commits with it.
MessageHook = Callable[["Scope", "Message"], "Op[None]"]
#: Runs inside the transaction that moved a conversation's active branch off the path it
#: was on (an append that forks, a new active leaf, deleted messages), with the
#: conversation's id, so data judged against the active branch (facts) commits with it.
BranchHook = Callable[["Scope", str], "Op[None]"]


@dataclass(frozen=True, slots=True)
class Limits:
    max_content_bytes: int = 1_000_000
    max_metadata_bytes: int = 64_000
    max_files: int = 64
    max_tool_calls: int = 128
    page_size: int = 50
    max_page_size: int = 500


@dataclass(slots=True)
class Runtime:
    """Shared by the sync and async facades of one opened memory."""

    tokenizer: Tokenizer
    limits: Limits = field(default_factory=Limits)
    cascade: Cascade = field(default_factory=Cascade)
    clock: Callable[[], int] = now_micros
    make_id: Callable[[], str] = new_id
    on_message: list[MessageHook] = field(default_factory=list)
    on_branch_change: list[BranchHook] = field(default_factory=list)


def page_limit(rt: Runtime, limit: int | None) -> int:
    """The page size to read: the caller's ``limit`` within the store's bounds, or the default."""
    if limit is None:
        return rt.limits.page_size
    if not 1 <= limit <= rt.limits.max_page_size:
        raise InvalidInput(f"limit must be between 1 and {rt.limits.max_page_size}", field="limit")
    return limit
