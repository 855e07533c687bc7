"""What prompt provenance adds to an opened memory: its cascade steps, and the fact-usage
counter that memory health reads."""

from __future__ import annotations

from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING

from memstrata.provenance import cascade
from memstrata.provenance.usage import fact_use_counts
from memstrata.storage.plan import Op
from memstrata.types import Scope

if TYPE_CHECKING:
    from memstrata.api.core import Core

__all__ = ["FactUsage", "install"]

#: How many recorded contexts held each fact (of an owner).
FactUsage = Callable[[Scope, Sequence[str]], Op[dict[str, int]]]


def install(core: Core) -> FactUsage:
    """Register the cascade steps; returns the counter memory health's unused-facts check
    reads (without provenance, health reports usage as unknown)."""
    core.rt.cascade.on_conversation_delete(cascade.forget_conversations)
    core.rt.cascade.on_messages_delete(cascade.forget_messages)
    core.rt.cascade.on_user_delete(cascade.forget_user)
    # A record's items outlive a deleted message or fact as tombstones (its id, never its
    # text), by design: deletion receipts' verification does not count them as left over.
    core.rt.cascade.keeps_ids.add("context_record_items")
    return fact_use_counts
