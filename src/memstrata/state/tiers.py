"""The agent-state tiers of a context, which the ``state`` feature registers as tier
providers: working memory, the plan, and a task's failed attempts.

``working`` (n8n's working memory) holds the user's document and the conversation's,
both, each under a label saying which it is: the conversation's notes add to what is
known about the user across conversations, they do not replace it.

``iterations`` is off unless the caller names a task (``context(..., task=...)``): it
then renders that task's most recent failed attempts in this conversation, oldest
first, so a sub-agent's briefing says what was tried and how it failed (n8n keeps
these retry logs for exactly that). An attempt counts as failed unless its outcome is
one of :data:`SUCCESS_OUTCOMES`.
"""

from __future__ import annotations

import json
from collections.abc import Callable
from typing import TYPE_CHECKING

from memstrata.state.iterations import iteration_row, open_iteration
from memstrata.state.plans import find_plan
from memstrata.state.working import find_working_memory
from memstrata.storage.plan import Op, Query
from memstrata.storage.sql import placeholders
from memstrata.types import Scope

if TYPE_CHECKING:
    from memstrata.context.tiers import TierItem, TierRequest
    from memstrata.runtime import Runtime

__all__ = [
    "CONVERSATION_LABEL",
    "MAX_ATTEMPTS",
    "MAX_ERROR_CHARS",
    "SUCCESS_OUTCOMES",
    "USER_LABEL",
    "IterationsTier",
    "PlanTier",
    "WorkingTier",
    "iteration_items",
    "working_items",
]

#: At most this many failed attempts are offered (the newest ones).
MAX_ATTEMPTS = 5
#: An attempt's error and detail are cut to this many characters each.
MAX_ERROR_CHARS = 600
SUCCESS_OUTCOMES = frozenset({"success", "succeeded", "ok", "done", "passed", "completed"})
USER_LABEL = "User working memory (kept across conversations):"
CONVERSATION_LABEL = "Conversation working memory (this conversation only):"

Item = Callable[..., "TierItem"]


def working_items(scope: Scope, conversation_id: str, item: Item) -> Op[list[TierItem]]:
    """The user's and the conversation's working memory, labelled, the user's first."""
    out: list[TierItem] = []
    for cid, label, name in (
        (None, USER_LABEL, "working:user"),
        (conversation_id, CONVERSATION_LABEL, "working:conversation"),
    ):
        doc = yield from find_working_memory(scope, cid)
        if doc is not None:
            scope_name = "user" if cid is None else "conversation"
            out.append(item(name, f"{label}\n{doc.text}", version=doc.version, scope=scope_name))
    return out


def _cut(text: str) -> str:
    return text if len(text) <= MAX_ERROR_CHARS else text[: MAX_ERROR_CHARS - 1] + "…"


def iteration_items(
    conversation_id: str, task: str, item: Item, limit: int = MAX_ATTEMPTS
) -> Op[list[TierItem]]:
    """The task's newest failed attempts in this conversation, oldest first."""
    marks = placeholders(len(SUCCESS_OUTCOMES))
    rows = yield Query(
        "SELECT seq, attempt, outcome, error, detail, created_at FROM iteration_logs "
        f"WHERE conversation_id = ? AND task = ? AND outcome NOT IN ({marks}) "
        "ORDER BY seq DESC LIMIT ?",
        (conversation_id, task, *sorted(SUCCESS_OUTCOMES), limit),
    )
    out: list[TierItem] = []
    # No times in the text: the same log gives the same block (and the same context hash).
    for seq, attempt, outcome, stored_error, stored_detail, at in reversed(rows):
        row = iteration_row(conversation_id, task, attempt, at)
        error, detail = open_iteration(row, stored_error, stored_detail)
        line = f"Attempt {attempt} of task {task!r} ({outcome})"
        if error:
            line += f": {_cut(' '.join(str(error).split()))}"
        if detail:
            compact = json.dumps(json.loads(detail), ensure_ascii=False, sort_keys=True)
            line += f" detail: {_cut(compact)}"
        out.append(item(f"iteration:{seq}", line, task=task, attempt=attempt, outcome=outcome))
    return out


# The providers (:class:`~memstrata.context.tiers.TierProvider`). They offer everything
# they have, whatever the allowance: the budget takes an item whole or leaves it out.


class WorkingTier:
    """``working``: the user's and the conversation's working memory."""

    tier = "working"
    only_when_offering = True

    def provide(self, rt: Runtime, request: TierRequest) -> Op[list[TierItem]]:
        return (yield from working_items(request.scope, request.conversation_id, request.item))


class IterationsTier:
    """``iterations``: the failed attempts of the task the caller names (off without)."""

    tier = "iterations"
    only_when_offering = True

    def provide(self, rt: Runtime, request: TierRequest) -> Op[list[TierItem]]:
        if request.task is None:
            return []
        return (yield from iteration_items(request.conversation_id, request.task, request.item))


class PlanTier:
    """``plan``: the conversation's plan document (or the user's), as indented JSON."""

    tier = "plan"
    only_when_offering = True

    def provide(self, rt: Runtime, request: TierRequest) -> Op[list[TierItem]]:
        plan = yield from find_plan(request.scope, request.conversation_id)
        if plan is None:
            return []
        text = json.dumps(plan.document, ensure_ascii=False, indent=2, sort_keys=True)
        return [request.item("plan", text, version=plan.version)]
