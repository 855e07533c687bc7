"""The facade: :class:`Memory` (sync) and :class:`AsyncMemory`, one implementation."""

from memstrata.api._async import AsyncMemory
from memstrata.api._sync import Memory

__all__ = ["AsyncMemory", "Memory"]
