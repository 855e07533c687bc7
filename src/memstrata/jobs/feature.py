"""What the job queue adds to an opened memory: deletes take the jobs of what they delete."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memstrata.jobs import ops

if TYPE_CHECKING:
    from memstrata.api.core import Core

__all__ = ["install"]


def install(core: Core) -> None:
    core.rt.cascade.on_conversation_delete(ops.delete_for_conversations)
    core.rt.cascade.on_messages_delete(ops.delete_for_messages)
    core.rt.cascade.on_user_delete(ops.delete_for_user)
