"""Retention: per-tenant policies saying how long each kind of data is kept.

Kinds and what "old" means for each:

* ``conversations`` — not updated (no message, no edit) for ``max_age``; deleted through
  the conversation cascade, so messages, summaries, plans, recall rows, facts' provenance,
  node memories and jobs go with them;
* ``node_memories`` — not written for ``max_age`` (their blobs are purged too);
* ``jobs`` — finished (``done``) more than ``max_age`` ago; dead letters stay until
  retried or their user is deleted;
* ``checkpoints`` — expired more than ``max_age`` ago;
* ``snapshots`` — run snapshots not updated for ``max_age``;
* ``context_records`` — prompt provenance records made more than ``max_age`` ago (with no
  policy they are kept as long as their conversation; their conversation's own
  retention and every deletion cascade remove them too).
* ``usage`` — usage rows (model calls, :mod:`memstrata.usage`) made more than ``max_age``
  ago; with no policy they are kept, like every kind.
* ``receipts`` — deletion receipts written more than ``max_age`` ago (365 days when no
  policy of this kind exists: receipts hold ids and counts, never content).

A policy names a tenant, or ``*`` for every tenant without its own policy of that kind.
:mod:`~memstrata.retention.policies` stores them and deletes what is past them,
:mod:`~memstrata.retention.plan` decides a run, :mod:`~memstrata.retention.job` repeats it.
"""

from memstrata.retention.job import RETENTION_JOB
from memstrata.retention.plan import Step, plan
from memstrata.retention.policies import (
    ALL_TENANTS,
    KINDS,
    Policy,
    candidates,
    check_kind,
    count,
    cutoff,
    delete_policy,
    list_policies,
    node_tenants,
    purge,
    set_policy,
)

__all__ = [
    "ALL_TENANTS",
    "KINDS",
    "RETENTION_JOB",
    "Policy",
    "Step",
    "candidates",
    "check_kind",
    "count",
    "cutoff",
    "delete_policy",
    "list_policies",
    "node_tenants",
    "plan",
    "purge",
    "set_policy",
]
