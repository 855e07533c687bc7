"""Which memory an LLM node uses, after Dify's ``MemoryMode``."""

from __future__ import annotations

from enum import StrEnum

from pydantic import BaseModel, ConfigDict, Field

from memstrata.errors import ConfigurationError

__all__ = ["MemoryConfig", "MemoryMode"]


class MemoryMode(StrEnum):
    CONVERSATION = "conversation"  # the conversation's own history (default)
    NODE = "node"  # a history of this node's turns only


class MemoryConfig(BaseModel):
    """A node's memory settings: the mode and the history budget."""

    model_config = ConfigDict(extra="forbid")

    mode: MemoryMode = MemoryMode.CONVERSATION
    max_tokens: int | None = Field(default=2000, ge=0)
    max_messages: int = Field(default=500, ge=1)

    def check(self, *, conversation_id: str | None, node_id: str | None = None) -> None:
        """Refuse node memory where it cannot work: it needs a conversation and a node."""
        if self.mode is MemoryMode.NODE:
            if not conversation_id:
                raise ConfigurationError(
                    "memory mode 'node' needs a conversation id: node memory is kept per "
                    "(app, conversation, node), so it only works in a chat flow; use "
                    "mode='conversation' or pass conversation_id"
                )
            if not node_id:
                raise ConfigurationError("memory mode 'node' needs a node id")
