"""A Google ADK memory service on memstrata.

:class:`MemstrataMemoryService` is an ADK ``BaseMemoryService``
(``Runner(memory_service=...)``, read by ADK's ``load_memory`` and ``preload_memory``
tools):

- ``add_session_to_memory`` / ``add_events_to_memory`` keep the text of a session's
  events as a memstrata conversation of the user (one per ADK session id; adding the
  same session again adds only its new events);
- ``add_memory`` stores explicit memories as the user's facts;
- ``search_memory`` returns the facts that share words with the query, then the past
  messages memstrata's recall finds (hybrid keyword and vector search);
- ``delete_memory`` deletes a fact (``fact:<id>`` as ``search_memory`` names it).

ADK's ``app_name`` is the memstrata tenant unless ``tenant`` is given, its ``user_id``
the user; both must be valid memstrata scope names.

Needs ``pip install 'memstrata[google-adk]'``.
"""

from __future__ import annotations

import contextlib
import uuid
from collections.abc import Mapping, Sequence
from datetime import UTC, datetime
from typing import Any

from memstrata.errors import Conflict, InvalidInput, MissingDependency, NotFound
from memstrata.integrations._common import (
    MemoryLike,
    all_facts,
    as_async,
    ensure_conversation,
    rank_facts,
    session_conversation_id,
)
from memstrata.types import Role, Scope

try:
    from google.adk.events import Event
    from google.adk.memory import BaseMemoryService
    from google.adk.memory.base_memory_service import SearchMemoryResponse
    from google.adk.memory.memory_entry import MemoryEntry
    from google.adk.sessions import Session
    from google.genai import types
except ImportError:
    raise MissingDependency(
        "the Google ADK integration needs google-adk: pip install 'memstrata[google-adk]'"
    ) from None

__all__ = ["MemstrataMemoryService", "event_text"]

_FACT = "fact:"


def event_text(event: Event) -> str:
    """The text parts of an event (tool calls and other parts are not memory)."""
    if event.content is None or not event.content.parts:
        return ""
    return "\n".join(p.text for p in event.content.parts if p.text and not p.thought)


def _text(content: types.Content) -> str:
    return "\n".join(p.text for p in content.parts or () if p.text)


class MemstrataMemoryService(BaseMemoryService):
    """ADK's memory service over memstrata (``memory`` is a Memory or AsyncMemory)."""

    def __init__(self, memory: MemoryLike, *, tenant: str | None = None, k: int = 5) -> None:
        self._memory = as_async(memory)
        self.tenant = tenant
        self.k = k

    def scope(self, app_name: str, user_id: str) -> Scope:
        """The memstrata scope of an ADK app's user."""
        return Scope(tenant=self.tenant or app_name, user=user_id)

    async def add_session_to_memory(self, session: Session) -> None:
        await self.add_events_to_memory(
            app_name=session.app_name,
            user_id=session.user_id,
            events=session.events,
            session_id=session.id,
        )

    async def add_events_to_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        events: Sequence[Event],
        session_id: str | None = None,
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        scope = self.scope(app_name, user_id)
        cid = session_conversation_id("google-adk", scope, session_id or "adk-events")
        rows = [(e, text) for e in events if (text := event_text(e))]
        if not rows:
            return
        await ensure_conversation(self._memory, scope, cid, title=session_id)
        for event, text in rows:
            await self._memory.messages.append(
                scope,
                cid,
                # The same event added again is the same message: a replay, not a copy.
                id=str(uuid.uuid5(uuid.UUID(cid), event.id)),
                role=Role.USER if event.author == "user" else Role.ASSISTANT,
                content=text,
                metadata={"adk_event_id": event.id, "author": event.author},
                occurred_at=datetime.fromtimestamp(event.timestamp, UTC),
            )

    async def add_memory(
        self,
        *,
        app_name: str,
        user_id: str,
        memories: Sequence[MemoryEntry],
        custom_metadata: Mapping[str, object] | None = None,
    ) -> None:
        scope = self.scope(app_name, user_id)
        for entry in memories:
            text = _text(entry.content)
            if not text:
                raise InvalidInput("a memory needs text", field="memories")
            category = str(entry.custom_metadata.get("category", "context"))
            with contextlib.suppress(Conflict):  # an active fact already says the same
                await self._memory.facts.add(scope, text, category=category)

    async def search_memory(
        self, *, app_name: str, user_id: str, query: str
    ) -> SearchMemoryResponse:
        scope = self.scope(app_name, user_id)
        found: list[MemoryEntry] = []
        for fact, score in rank_facts(await all_facts(self._memory, scope), query):
            found.append(
                MemoryEntry(
                    id=_FACT + fact.id,
                    content=types.Content(role="user", parts=[types.Part(text=fact.content)]),
                    custom_metadata={"source": "fact", "category": fact.category, "score": score},
                    timestamp=fact.updated_at.isoformat(),
                )
            )
        if query.strip():
            for hit in await self._memory.recall.search(scope, query, k=self.k):
                m = hit.message
                author = m.metadata.get("author") or ("user" if m.role is Role.USER else "model")
                meta: dict[str, Any] = {
                    "source": "recall",
                    "conversation_id": hit.conversation_id,
                    "score": hit.score,
                }
                found.append(
                    MemoryEntry(
                        id=m.id,
                        content=types.Content(
                            role="user" if m.role is Role.USER else "model",
                            parts=[types.Part(text=m.content)],
                        ),
                        author=str(author),
                        timestamp=m.occurred_at.isoformat(),
                        custom_metadata=meta,
                    )
                )
        return SearchMemoryResponse(memories=found)

    async def delete_memory(
        self, *, app_name: str, user_id: str, memory_id: str | None = None
    ) -> None:
        if not memory_id or not memory_id.startswith(_FACT):
            raise NotImplementedError(
                "memstrata deletes facts (fact:<id>) here; past messages are deleted "
                "with their conversation"
            )
        with contextlib.suppress(NotFound):
            await self._memory.facts.delete(self.scope(app_name, user_id), memory_id[len(_FACT) :])
