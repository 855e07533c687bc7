"""What long-term memory adds to an opened memory: its kit (capture at append, the
extraction job, the facts and profile tiers of the context, cascade steps), and memory
health's consolidation job."""

from __future__ import annotations

from typing import TYPE_CHECKING

from memstrata.longterm.consolidate import CONSOLIDATE_JOB
from memstrata.longterm.service import LongTermKit

if TYPE_CHECKING:
    from memstrata.api.core import Core, JobContext
    from memstrata.context.kit import ContextKit
    from memstrata.jobs.worker import Handler
    from memstrata.recall.service import RecallEngine

__all__ = ["install", "install_health"]


def install(
    core: Core, context: ContextKit, recall: RecallEngine, extract: Handler[JobContext]
) -> LongTermKit:
    """The memory's long-term kit: its model defaults to ``context``'s, its embedder to
    ``recall``'s; its tiers join ``context``; ``extract`` (the facade's flush) runs the
    extraction jobs."""
    kit = LongTermKit(core, context, recall)
    kit.install(extract)
    return kit


def install_health(core: Core, consolidate: Handler[JobContext]) -> None:
    """Register ``consolidate`` (the facade's applied consolidation) for its job kind."""
    core.jobs.register(CONSOLIDATE_JOB, consolidate, lease_s=core.settings.longterm_lease_seconds)
