"""What prompt provenance adds to an opened memory: its cascade steps, and the fact-usage
counter that memory health reads from the core."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memstrata.provenance import cascade
from memstrata.provenance.usage import fact_use_counts

if TYPE_CHECKING:
    from memstrata.api.core import Core

__all__ = ["install"]


def install(core: Core) -> None:
    core.rt.cascade.on_conversation_delete(cascade.forget_conversations)
    core.rt.cascade.on_messages_delete(cascade.forget_messages)
    core.rt.cascade.on_user_delete(cascade.forget_user)
    # A record's items outlive a deleted message or fact as tombstones (its id, never its
    # text), by design: deletion receipts' verification does not count them as left over.
    core.rt.cascade.keeps_ids.add("context_record_items")
    # Memory health's unused-facts check counts uses through this (see Core.fact_usage).
    core.fact_usage = fact_use_counts
