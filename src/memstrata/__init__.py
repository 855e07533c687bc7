"""memstrata: a memory layer for LLM chat apps and agents.

>>> from memstrata import Memory, Scope
>>> mem = Memory.open()                       # SQLite under ./.memstrata, no network
>>> scope = Scope(tenant="acme", user="u1")
"""

from __future__ import annotations

import importlib
from typing import TYPE_CHECKING, Any

from memstrata.errors import (
    BackendUnavailable,
    ConfigurationError,
    Conflict,
    Corruption,
    Expired,
    Forbidden,
    InvalidInput,
    MemstrataError,
    MissingDependency,
    NotFound,
    PayloadTooLarge,
    PreconditionFailed,
    RateLimited,
    Unauthorized,
)
from memstrata.ids import UUID_NIL, new_id
from memstrata.types import (
    Conversation,
    FileRef,
    Message,
    MessagePatch,
    NewMessage,
    Page,
    Role,
    Scope,
    Status,
    ToolCall,
)
from memstrata.version import __version__

if TYPE_CHECKING:
    from memstrata.api import AsyncMemory, Memory
    from memstrata.domain.history import History

__all__ = [
    "UUID_NIL",
    "AsyncMemory",
    "BackendUnavailable",
    "ConfigurationError",
    "Conflict",
    "Conversation",
    "Corruption",
    "Expired",
    "FileRef",
    "Forbidden",
    "History",
    "InvalidInput",
    "Memory",
    "MemstrataError",
    "Message",
    "MessagePatch",
    "MissingDependency",
    "NewMessage",
    "NotFound",
    "Page",
    "PayloadTooLarge",
    "PreconditionFailed",
    "RateLimited",
    "Role",
    "Scope",
    "Status",
    "ToolCall",
    "Unauthorized",
    "__version__",
    "new_id",
]

# Imported on first use (PEP 562): every module under memstrata runs this file first, so
# it loads the kernel only. The facade brings the whole local stack (features, storage,
# backends), which `import memstrata.client` must not.
_LAZY = {
    "AsyncMemory": "memstrata.api",
    "Memory": "memstrata.api",
    "History": "memstrata.domain.history",
}


def __getattr__(name: str) -> Any:
    module = _LAZY.get(name)
    if module is None:
        raise AttributeError(f"module 'memstrata' has no attribute {name!r}")
    value = getattr(importlib.import_module(module), name)
    globals()[name] = value  # later lookups skip this function
    return value


def __dir__() -> list[str]:
    return sorted(set(globals()) | set(_LAZY))
