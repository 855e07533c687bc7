"""Node-scoped memory: a separate turn history per (tenant, app, conversation, node),
kept in the blob store (see :mod:`memstrata.nodes.log` for the object layout)."""

from memstrata.nodes.config import MemoryConfig, MemoryMode
from memstrata.nodes.layout import NodeKey, Turn
from memstrata.nodes.thread import NodeHistory

__all__ = ["MemoryConfig", "MemoryMode", "NodeHistory", "NodeKey", "Turn"]
