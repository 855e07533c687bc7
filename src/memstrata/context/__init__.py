"""Context assembly under one token budget, and rolling compaction."""

from memstrata.context.kit import COMPACT_JOB, CompactionResult, ContextKit
from memstrata.context.ops import Context, ContextReport, Summary
from memstrata.context.tiers import TierItem, TierPolicy, TierProvider, TierRequest

__all__ = [
    "COMPACT_JOB",
    "CompactionResult",
    "Context",
    "ContextKit",
    "ContextReport",
    "Summary",
    "TierItem",
    "TierPolicy",
    "TierProvider",
    "TierRequest",
]
