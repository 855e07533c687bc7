"""The job handlers that run a facade operation, beside the facade they call.

A job handler gets the job and the sync facade (:class:`~memstrata.api._sync.Memory`)
of the memory whose worker claimed it, the same as a handler registered with
``mem.jobs.register``. The features own their job kinds (name, lease, priority) and take
the handler as an argument of their ``install()``: a feature never receives the facade,
and the facade's operations stay in one place.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

from memstrata.receipts import job as receipt_job
from memstrata.types import Scope

if TYPE_CHECKING:
    from memstrata.api._sync import Memory
    from memstrata.jobs.ops import Job

__all__ = ["compact", "consolidate", "embed", "extract", "retention", "verify_receipts"]


def embed(job: Job, memory: Memory) -> None:
    """``recall.embed``: embed the conversation's messages still waiting."""
    scope = Scope(job.tenant, job.user or "", job.agent)
    memory.recall.flush(scope, conversation_id=job.conversation_id)


def extract(job: Job, memory: Memory) -> None:
    """``longterm.extract``: extract facts from what is new on the job's branch."""
    if job.conversation_id is None or job.user is None:
        return
    scope = Scope(job.tenant, job.user, job.agent)
    memory.longterm.flush(
        scope,
        job.conversation_id,
        leaf_id=job.payload.get("leaf_id"),
        flags=job.flags,
        job_id=job.id,
        wait_for_reply=True,
    )


def consolidate(job: Job, memory: Memory) -> None:
    """``longterm.consolidate``: apply a consolidation of the job's owner; the job's id
    is the consolidation's id (a retry after a crash plans again from what is active)."""
    if job.user is None:
        return
    scope = Scope(job.tenant, job.user, job.agent)
    semantic = job.payload.get("semantic") is True
    memory.memory.consolidate(scope, dry_run=False, semantic=semantic, consolidation_id=job.id)


def compact(job: Job, memory: Memory) -> None:
    """``memstrata.compact``: compact the job's conversation (the branch of its leaf)."""
    if job.conversation_id is None or job.user is None:
        return
    scope = Scope(job.tenant, job.user, job.agent)
    leaf_id, keep_from = job.payload.get("leaf_id"), job.payload.get("keep_from")
    if keep_from is None:
        memory.compact(scope, job.conversation_id, leaf_id=leaf_id)
    else:  # a context of the cache layout asked: its window's next step
        memory.compaction.run(scope, job.conversation_id, leaf_id=leaf_id, keep_from=keep_from)


def retention(job: Job, memory: Memory) -> None:
    """``memstrata.retention``: apply the stored policies, then come back after the
    interval."""
    memory.retention.apply()
    interval = memory.admin.settings.retention_interval_seconds
    if interval > 0 and memory.retention.policies():
        memory.retention.schedule(delay_s=interval)


def verify_receipts(job: Job, memory: Memory) -> None:
    """``receipts.verify``: verify the tenant's unverified receipts (a receipt retention
    removed meanwhile is simply no longer there)."""
    limit, budget_s = receipt_job.PER_RUN, receipt_job.BUDGET_S  # read per run: tests tune them
    memory.receipts.verify_pending(job.tenant, limit=limit, budget_s=budget_s)
