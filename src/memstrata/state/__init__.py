"""Agent state: working memory, plans, iteration logs, checkpoints and run snapshots."""

from memstrata.state.ops import (
    EXPIRED_MESSAGE,
    Checkpoint,
    Iteration,
    PlanDoc,
    RunSnapshot,
    WorkingMemory,
)

__all__ = ["EXPIRED_MESSAGE", "Checkpoint", "Iteration", "PlanDoc", "RunSnapshot", "WorkingMemory"]
