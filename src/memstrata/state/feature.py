"""What agent state adds to an opened memory: deletes take the working memory, plans,
iterations, checkpoints and snapshots of what they delete."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memstrata.state import cascade

if TYPE_CHECKING:
    from memstrata.api.core import Core

__all__ = ["install"]


def install(core: Core) -> None:
    core.rt.cascade.on_conversation_delete(cascade.delete_for_conversations)
    core.rt.cascade.on_user_delete(cascade.delete_for_user)
