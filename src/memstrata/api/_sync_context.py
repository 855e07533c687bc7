"""Generated from ``_async_context.py`` by ``scripts/unasync.py``: do not edit."""

from __future__ import annotations

from datetime import datetime
from functools import partial
from typing import Any

from memstrata import context as ops
from memstrata import conversation as conversations
from memstrata.api._sync_base import SubAPI
from memstrata.context import CompactionPlan, Context, Summary
from memstrata.context.kit import COMPACT_JOB, CompactionResult, ContextKit
from memstrata.context.summarize import build_prompt, extractive_summary, summary_problem
from memstrata.jobs.ops import Job
from memstrata.longterm.clocks import parse_instant
from memstrata.recall.catchup import CatchUp
from memstrata.types import Scope
from memstrata.usage import attributed
from memstrata.validation import checked_scope as _scope

__all__ = ["Compaction"]


def _job_key(scope: Scope, conversation_id: str) -> str:
    """One queued compaction per conversation: repeated asks merge into it."""
    return f"{scope.tenant}/{conversation_id}"


class Compaction(SubAPI):
    """Rolling summaries: run a compaction, read the summary of a branch, see the attempts."""

    @property
    def kit(self) -> ContextKit:
        """Providers, policies, hooks and the LLM of this memory (shared by every facade)."""
        return self._core.context

    @attributed
    def assemble(
        self,
        scope: Scope,
        conversation_id: str,
        *,
        leaf_id: str | None = None,
        budget: int = 8000,
        query: str | None = None,
        model: str | None = None,
        task: str | None = None,
        as_of: datetime | str | None = None,
        layout: str | None = None,
    ) -> Context:
        rt = self._core.rt
        s = _scope(scope)
        at = parse_instant(as_of, "as_of")
        settings = self.kit.settings()
        query, qvec, space, pending = self._embed_query(s, conversation_id, leaf_id, query)
        context: Context = self._read(
            ops.assemble,
            rt,
            s,
            conversation_id,
            settings,
            leaf_id=leaf_id,
            budget=budget,
            query=query,
            model=model,
            query_vector=qvec,
            embedder=space,
            task=task,
            as_of=at,
            layout=layout,
        )
        recall = context.report.tiers.get(self._core.recall.tier.tier)
        if recall is not None:
            recall.pending = pending
        return context

    def _embed_query(
        self, scope: Scope, conversation_id: str, leaf_id: str | None, query: str | None
    ) -> tuple[str | None, list[float] | None, str | None, int]:
        """The query of the recall tier embedded before the assembly's transaction (the
        embedder may be slow or remote); with no embedder, keywords do it alone."""
        recall = self._core.recall
        if recall.tier not in self.kit.providers or recall.tier.k == 0:
            return query, None, None, 0
        return CatchUp(self._core).context_query(scope, conversation_id, leaf_id, query)

    @attributed
    def run(
        self,
        scope: Scope,
        conversation_id: str,
        *,
        leaf_id: str | None = None,
        keep_from: int | None = None,
    ) -> CompactionResult:
        """Summarise what the branch's summary does not cover yet, older than the window
        (``keep_from``: the whole turns starting before that point of the branch, in
        cumulative tokens, as a context of the cache layout asks: its window's next step).

        Skips below 500 new tokens. A failed model call or an empty or malformed
        summary stores nothing (the previous summary stays) and is logged.
        """
        s = _scope(scope)
        rt, kit = self._core.rt, self.kit
        plan: CompactionPlan = self._read(
            ops.prepare_compaction,
            rt,
            s,
            conversation_id,
            leaf_id=leaf_id,
            window=kit.window,
            keep_from=keep_from,
        )
        if plan.skip is not None:
            return CompactionResult("skipped", plan.skip, plan.previous)
        for hook in kit.hooks:
            hook(s, conversation_id, plan.messages)
        for hook_op in kit.hook_ops:
            step = partial(hook_op, s, conversation_id, plan.messages)
            self._write(step)
        previous = None if plan.previous is None else plan.previous.content
        text, method, problem = self._summarize(previous, plan)
        if problem is not None:
            self._write(
                ops.record_compaction_failure,
                rt,
                s,
                conversation_id,
                plan.leaf_id,
                "failed",
                problem,
            )
            return CompactionResult("failed", problem, plan.previous)
        summary = self._write(ops.finish_compaction, rt, s, plan, text, method)
        return CompactionResult("compacted", None, summary)

    def _summarize(
        self, previous: str | None, plan: CompactionPlan
    ) -> tuple[str, str, str | None]:
        llm = self.kit.llm
        if llm is None:
            text = extractive_summary(previous, plan.messages)
            return text, "extractive", summary_problem(text)
        try:
            text = llm.complete(
                build_prompt(previous, plan.messages), model=self.kit.model, purpose="compaction"
            )
        except Exception as exc:  # any model failure keeps the previous summary
            return "", "llm", f"LLM call failed: {type(exc).__name__}: {exc}"
        text = text.strip() if isinstance(text, str) else ""
        return text, "llm", summary_problem(text)

    def schedule(
        self,
        scope: Scope,
        conversation_id: str,
        *,
        leaf_id: str | None = None,
        delay_s: float = 0.0,
        max_wait_s: float | None = None,
        keep_from: int | None = None,
    ) -> Job:
        """Queue a compaction of the branch of ``leaf_id`` (default: the active leaf) as a
        background job, and return it.

        One compaction job waits per conversation: asking again while one is queued
        merges into it (its leaf becomes this one), and ``delay_s`` pushes it back, up to
        ``max_wait_s`` after the first ask (default ``delay_s``). NotFound when the
        conversation is not in ``scope``; a worker runs the job as :meth:`run`
        (``keep_from`` as there).
        """
        s = _scope(scope)
        self._read(conversations.get_conversation, s, conversation_id)
        return self._enqueue(
            COMPACT_JOB,
            tenant=s.tenant,
            user=s.user,
            agent=s.agent,
            key=_job_key(s, conversation_id),
            conversation_id=conversation_id,
            payload={"leaf_id": leaf_id}
            if keep_from is None
            else {"leaf_id": leaf_id, "keep_from": keep_from},
            delay_s=delay_s,
            max_wait_s=delay_s if max_wait_s is None else max_wait_s,
        )

    def summary(
        self, scope: Scope, conversation_id: str, *, leaf_id: str | None = None
    ) -> Summary:
        """The summary serving the branch of ``leaf_id`` (NotFound when none does)."""
        return self._read(ops.get_summary, _scope(scope), conversation_id, leaf_id)

    def log(self, scope: Scope, conversation_id: str) -> list[dict[str, Any]]:
        """Compaction attempts, newest first (failures carry their reason)."""
        return self._read(ops.compaction_log, _scope(scope), conversation_id)
