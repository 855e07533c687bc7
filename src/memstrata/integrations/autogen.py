"""An AutoGen ``Memory`` (autogen-core 0.7) over a user's memstrata memory.

:class:`MemstrataMemory` gives an AutoGen agent (``AssistantAgent(memory=[...])``) the
user's long-term memory:

- ``add`` stores a text (or JSON) memory as a memstrata fact of the user; the
  ``category`` in its metadata picks the fact's category (default ``context``);
- ``query`` returns the facts that share words with the query and the user's past
  messages that memstrata's recall finds for it (hybrid keyword and vector search);
- ``update_context`` adds, before each model call, one system message with what memstrata
  would put in a context: for the conversation given as ``conversation_id``, its memory
  blocks (profile, facts, summary, recalled messages, see :meth:`memstrata.Memory.context`);
  without one, the user's facts and the recall hits for the latest user message;
- ``clear`` deletes the user's facts; ``close`` leaves the memstrata memory open (it is
  the caller's).

Needs ``pip install 'memstrata[autogen]'``.
"""

from __future__ import annotations

import contextlib
import json
from typing import Any

from memstrata.errors import Conflict, InvalidInput, MissingDependency, NotFound
from memstrata.integrations._common import (
    MemoryLike,
    all_facts,
    as_async,
    rank_facts,
    user_memory_blocks,
)
from memstrata.longterm.model import Fact
from memstrata.types import Scope

try:
    from autogen_core import CancellationToken
    from autogen_core.memory import (
        Memory,
        MemoryContent,
        MemoryMimeType,
        MemoryQueryResult,
        UpdateContextResult,
    )
    from autogen_core.model_context import ChatCompletionContext
    from autogen_core.models import SystemMessage, UserMessage
except ImportError:
    raise MissingDependency(
        "the AutoGen integration needs autogen-core 0.7: pip install 'memstrata[autogen]'"
    ) from None

__all__ = ["MemstrataMemory"]

_TEXT_TYPES = {MemoryMimeType.TEXT.value, MemoryMimeType.MARKDOWN.value, MemoryMimeType.JSON.value}


def _fact_content(fact: Fact, score: float) -> MemoryContent:
    return MemoryContent(
        content=fact.content,
        mime_type=MemoryMimeType.TEXT,
        metadata={"source": "fact", "fact_id": fact.id, "category": fact.category, "score": score},
    )


class MemstrataMemory(Memory):
    """The long-term memory of one memstrata user (``scope``) as an AutoGen memory.

    ``memory`` is a :class:`~memstrata.Memory` or :class:`~memstrata.AsyncMemory`;
    ``conversation_id`` (optional) names the memstrata conversation the agent's chat is
    kept in, for a full context in ``update_context``; ``k`` caps recall hits.
    """

    component_type = "memory"

    def __init__(
        self,
        memory: MemoryLike,
        scope: Scope,
        *,
        conversation_id: str | None = None,
        k: int = 5,
        budget: int = 2000,
    ) -> None:
        self._memory = as_async(memory)
        self.scope = scope
        self.conversation_id = conversation_id
        self.k = k
        self.budget = budget

    async def _facts(self) -> list[Fact]:
        return await all_facts(self._memory, self.scope)

    async def add(
        self, content: MemoryContent, cancellation_token: CancellationToken | None = None
    ) -> None:
        """Store ``content`` as a fact of the user (adding the same fact twice is a no-op)."""
        kind = content.mime_type
        mime = kind.value if isinstance(kind, MemoryMimeType) else str(kind)
        if mime not in _TEXT_TYPES:
            raise InvalidInput(f"only text memories can be stored, got {mime}", field="mime_type")
        value = content.content
        text = value if isinstance(value, str) else json.dumps(value, ensure_ascii=False)
        category = str((content.metadata or {}).get("category", "context"))
        with contextlib.suppress(Conflict):  # an active fact already says the same
            await self._memory.facts.add(self.scope, text, category=category)

    async def query(
        self,
        query: str | MemoryContent = "",
        cancellation_token: CancellationToken | None = None,
        **kwargs: Any,
    ) -> MemoryQueryResult:
        """Facts sharing words with ``query``, then recalled messages (``k=`` overrides)."""
        text = query if isinstance(query, str) else str(query.content)
        k = int(kwargs.get("k", self.k))
        found = [_fact_content(f, s) for f, s in rank_facts(await self._facts(), text)]
        if text.strip():
            for hit in await self._memory.recall.search(self.scope, text, k=k):
                found.append(
                    MemoryContent(
                        content=hit.message.content,
                        mime_type=MemoryMimeType.TEXT,
                        metadata={
                            "source": "recall",
                            "conversation_id": hit.conversation_id,
                            "message_id": hit.message.id,
                            "score": hit.score,
                        },
                    )
                )
        return MemoryQueryResult(results=found)

    async def update_context(self, model_context: ChatCompletionContext) -> UpdateContextResult:
        """Add one system message with the user's memory to ``model_context``."""
        messages = await model_context.get_messages()
        users = [m for m in messages if isinstance(m, UserMessage)]
        last = users[-1].content if users else ""
        query = last if isinstance(last, str) else " ".join(p for p in last if isinstance(p, str))
        blocks = await user_memory_blocks(
            self._memory,
            self.scope,
            self.conversation_id,
            query or None,
            budget=self.budget,
            k=self.k,
        )
        result = await self.query(query)
        if blocks:
            await model_context.add_message(SystemMessage(content="\n\n".join(blocks)))
        return UpdateContextResult(memories=result)

    async def clear(self) -> None:
        """Delete every fact of the user."""
        for fact in await self._facts():
            with contextlib.suppress(NotFound):
                await self._memory.facts.delete(self.scope, fact.id)

    async def close(self) -> None:
        """Nothing to release: the memstrata memory belongs to the caller."""
