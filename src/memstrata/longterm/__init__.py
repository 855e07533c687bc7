"""Long-term per-user memory: capture, debounced extraction, the fact store, the profile,
and the ``<memory>`` context tier (see :mod:`memstrata.api._async_longterm`)."""

from memstrata.longterm.extract import ExtractionResult
from memstrata.longterm.model import (
    ExtractionFailed,
    Fact,
    FactEvent,
    FactOrigin,
    FactStatus,
    ProfileSection,
)

__all__ = [
    "ExtractionFailed",
    "ExtractionResult",
    "Fact",
    "FactEvent",
    "FactOrigin",
    "FactStatus",
    "ProfileSection",
]
