"""What context assembly adds to an opened memory: its kit (tiers, policies, the model),
the compaction job, and the cascade steps that drop summaries and prefixes of what a
delete or a splice changed."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memstrata.context import prefix, summaries
from memstrata.context.kit import COMPACT_JOB, ContextKit
from memstrata.llm import llm_from_settings

if TYPE_CHECKING:
    from memstrata.api.core import Core, JobContext
    from memstrata.jobs.worker import Handler

__all__ = ["install"]


def install(core: Core, compact: Handler[JobContext]) -> ContextKit:
    """The memory's context kit; ``compact`` (the facade's compaction) runs its jobs."""
    s = core.settings
    kit = ContextKit(llm_from_settings(s), model=s.llm_model, wrap=core.wrap_llm)
    kit.layout, kit.low_water = s.context_layout, s.context_low_water
    core.rt.cascade.on_messages_delete(summaries.forget_messages)
    core.rt.cascade.on_conversation_delete(prefix.forget_conversations)
    core.rt.cascade.on_messages_delete(prefix.forget_messages)
    # A summary whose cover point moved held a spliced-out message's text.
    core.rt.cascade.on_messages_moved(summaries.forget_messages)
    core.rt.cascade.on_messages_moved(prefix.forget_messages)  # it hashed their old order
    core.jobs.register(COMPACT_JOB, compact)
    return kit
