"""What agent state adds to an opened memory: its context tiers (working memory, the
plan, a task's failed attempts), and the cascade steps that delete the working memory,
plans, iterations, checkpoints and snapshots of what a delete removes."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memstrata.state import cascade
from memstrata.state.tiers import IterationsTier, PlanTier, WorkingTier

if TYPE_CHECKING:
    from memstrata.api.core import Core
    from memstrata.context.kit import ContextKit

__all__ = ["install"]


def install(core: Core, context: ContextKit) -> None:
    core.rt.cascade.on_conversation_delete(cascade.delete_for_conversations)
    core.rt.cascade.on_user_delete(cascade.delete_for_user)
    # Offered in this order, before the tiers later features add (the budget and the
    # blocks' places follow the policies and the layout, not this order).
    for provider in (WorkingTier(), IterationsTier(), PlanTier()):
        context.add_provider(provider)
