"""The facade: :class:`Memory` (sync) and :class:`AsyncMemory`, one implementation."""

from memstrata.api._async import AsyncMemory
from memstrata.api._sync import Memory
from memstrata.api.core import Core

# Job handlers get a sync Memory over the Core that runs them.
Core.sync_facade = Memory

__all__ = ["AsyncMemory", "Memory"]
