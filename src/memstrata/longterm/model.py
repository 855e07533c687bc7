"""The vocabulary of long-term memory (facts, profile sections, captured turns, what one
extraction proposes), under the feature's name.

The types live in :mod:`memstrata.domain.longterm`, where the remote client can import
them without loading this feature.
"""

from memstrata.domain.longterm import (
    CATEGORIES,
    PROFILE_LABELS,
    PROFILE_SECTIONS,
    ExtractionFailed,
    Fact,
    FactEvent,
    FactOrigin,
    FactSource,
    FactStatus,
    MemoryState,
    ProfileSection,
    PromptFact,
    ProposedFact,
    ProposedUpdate,
    Removal,
    Signal,
    Turn,
    UpdateParseError,
)

__all__ = [
    "CATEGORIES",
    "PROFILE_LABELS",
    "PROFILE_SECTIONS",
    "ExtractionFailed",
    "Fact",
    "FactEvent",
    "FactOrigin",
    "FactSource",
    "FactStatus",
    "MemoryState",
    "ProfileSection",
    "PromptFact",
    "ProposedFact",
    "ProposedUpdate",
    "Removal",
    "Signal",
    "Turn",
    "UpdateParseError",
]
