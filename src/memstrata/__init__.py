"""memstrata: a memory layer for LLM chat apps and agents.

>>> from memstrata import Memory, Scope
>>> mem = Memory.open()                       # SQLite under ./.memstrata, no network
>>> scope = Scope(tenant="acme", user="u1")
"""

from memstrata.api import AsyncMemory, Memory
from memstrata.conversation.history import History
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
