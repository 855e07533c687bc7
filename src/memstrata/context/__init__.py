"""Context assembly under one token budget, and rolling compaction.

The operations the facade runs, by concern: :mod:`.assemble` (with the pure
:mod:`.budget`), :mod:`.summaries`, :mod:`.compaction` and :mod:`.windows`.
"""

from memstrata.context.assemble import Settings, assemble, default_query, default_query_message
from memstrata.context.compaction import (
    MIN_NEW_TOKENS,
    CompactionPlan,
    compaction_log,
    finish_compaction,
    prepare_compaction,
    record_compaction_failure,
)
from memstrata.context.kit import COMPACT_JOB, CompactionResult, ContextKit
from memstrata.context.layout import LAYOUTS, Layout
from memstrata.context.summaries import Summary, forget_messages, get_summary
from memstrata.context.tiers import (
    GROUP_CAPS,
    GROUP_LEADS,
    TierItem,
    TierPolicy,
    TierProvider,
    TierRequest,
)
from memstrata.context.windows import DEFAULT_WINDOW, context_window
from memstrata.domain.context import CacheReport, Context, ContextReport, TierReport

__all__ = [
    "COMPACT_JOB",
    "DEFAULT_WINDOW",
    "GROUP_CAPS",
    "GROUP_LEADS",
    "LAYOUTS",
    "MIN_NEW_TOKENS",
    "CacheReport",
    "CompactionPlan",
    "CompactionResult",
    "Context",
    "ContextKit",
    "ContextReport",
    "Layout",
    "Settings",
    "Summary",
    "TierItem",
    "TierPolicy",
    "TierProvider",
    "TierReport",
    "TierRequest",
    "assemble",
    "compaction_log",
    "context_window",
    "default_query",
    "default_query_message",
    "finish_compaction",
    "forget_messages",
    "get_summary",
    "prepare_compaction",
    "record_compaction_failure",
]
