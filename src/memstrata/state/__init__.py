"""Agent state: working memory, plans, iteration logs, checkpoints and run snapshots.

The operations the facade runs, by concern: :mod:`.working`, :mod:`.plans`,
:mod:`.iterations`, :mod:`.checkpoints` (checkpoints and run snapshots) and
:mod:`.cascade` (what deletes remove).
"""

from memstrata.state.cascade import delete_for_conversations, delete_for_user
from memstrata.state.checkpoints import (
    EXPIRED_MESSAGE,
    Checkpoint,
    RunSnapshot,
    delete_checkpoint,
    get_snapshot,
    load_checkpoint,
    put_snapshot,
    save_checkpoint,
)
from memstrata.state.checks import Format
from memstrata.state.iterations import Iteration, append_iteration, list_iterations
from memstrata.state.plans import PlanDoc, find_plan, get_plan, put_plan
from memstrata.state.working import (
    WorkingMemory,
    delete_working_memory,
    find_working_memory,
    get_working_memory,
    put_working_memory,
)

__all__ = [
    "EXPIRED_MESSAGE",
    "Checkpoint",
    "Format",
    "Iteration",
    "PlanDoc",
    "RunSnapshot",
    "WorkingMemory",
    "append_iteration",
    "delete_checkpoint",
    "delete_for_conversations",
    "delete_for_user",
    "delete_working_memory",
    "find_plan",
    "find_working_memory",
    "get_plan",
    "get_snapshot",
    "get_working_memory",
    "list_iterations",
    "load_checkpoint",
    "put_plan",
    "put_snapshot",
    "put_working_memory",
    "save_checkpoint",
]
