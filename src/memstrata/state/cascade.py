"""What deleting conversations or a user removes of the agent state (cascade steps)."""

from __future__ import annotations

from collections.abc import Sequence

from memstrata.storage.plan import Exec, Op
from memstrata.storage.sql import placeholders

__all__ = ["delete_for_conversations", "delete_for_user"]


def delete_for_conversations(ids: Sequence[str]) -> Op[None]:
    marks = placeholders(len(ids))
    for table in (
        "working_memory",
        "plans",
        "iteration_logs",
        "checkpoints",
        "run_snapshots",
        "summaries",
        "compaction_log",
    ):
        yield Exec(f"DELETE FROM {table} WHERE conversation_id IN ({marks})", ids)


def delete_for_user(tenant: str, user: str) -> Op[None]:
    for table in ("working_memory", "checkpoints"):
        yield Exec(f"DELETE FROM {table} WHERE tenant_id = ? AND user_id = ?", (tenant, user))
