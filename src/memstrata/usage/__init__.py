"""Usage: what model calls cost, per process and in the store; per-tenant daily budgets.

* :mod:`~memstrata.usage.meter` — :class:`MeteredLLM` and :class:`MeteredEmbedder` wrap
  the models every feature calls and count each call (``/metrics``);
* :mod:`~memstrata.usage.scope` — whom a call is made for: :func:`usage_scope`, bound by
  the job runner and the facade (:func:`attributed`);
* :mod:`~memstrata.usage.ledger` — calls buffered and written to the store in batches;
* :mod:`~memstrata.usage.store` — the usage rows, daily totals and budgets.
"""

from memstrata.usage.ledger import UsageLedger
from memstrata.usage.meter import MeteredEmbedder, MeteredLLM, UsageMeter
from memstrata.usage.scope import CallScope, attributed, current_scope, usage_purpose, usage_scope
from memstrata.usage.store import (
    ANONYMOUS_USER,
    JOB_PURPOSES,
    PURPOSES,
    Budget,
    UsageRow,
    UsageTotal,
)

__all__ = [
    "ANONYMOUS_USER",
    "JOB_PURPOSES",
    "PURPOSES",
    "Budget",
    "CallScope",
    "MeteredEmbedder",
    "MeteredLLM",
    "UsageLedger",
    "UsageMeter",
    "UsageRow",
    "UsageTotal",
    "attributed",
    "current_scope",
    "usage_purpose",
    "usage_scope",
]
