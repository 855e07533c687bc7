"""Google ADK's memory service on memstrata: sessions become conversations once, explicit
memories become facts, search finds both, per app and user."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from integrations.adapters_support import run_example
from lazy_names import lazy
from memstrata import AsyncMemory, Scope
from memstrata.errors import InvalidInput

if TYPE_CHECKING:
    from google.adk.events import Event
    from google.adk.memory import BaseMemoryService
    from google.adk.memory.memory_entry import MemoryEntry
    from google.adk.sessions import InMemorySessionService
    from google.genai import types

    from memstrata.integrations.google_adk import MemstrataMemoryService
else:
    (Event,) = lazy("google.adk.events", "Event")
    (BaseMemoryService,) = lazy("google.adk.memory", "BaseMemoryService")
    (MemoryEntry,) = lazy("google.adk.memory.memory_entry", "MemoryEntry")
    (InMemorySessionService,) = lazy("google.adk.sessions", "InMemorySessionService")
    (types,) = lazy("google.genai", "types")
    (MemstrataMemoryService,) = lazy("memstrata.integrations.google_adk", "MemstrataMemoryService")

pytestmark = pytest.mark.anyio


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _event(author: str, text: str | None, **extra: object) -> Event:
    parts = (
        [types.Part(text=text)]
        if text is not None
        else [types.Part(function_call=types.FunctionCall(name="f", args={}))]
    )
    role = "user" if author == "user" else "model"
    return Event(author=author, content=types.Content(role=role, parts=parts), **extra)


def _text(entry: MemoryEntry) -> str | None:
    """The text of a memory entry's first part."""
    parts = entry.content.parts
    assert parts is not None
    return parts[0].text


async def test_sessions_are_added_once(amem: AsyncMemory) -> None:
    service = MemstrataMemoryService(amem)
    assert isinstance(service, BaseMemoryService)
    sessions = InMemorySessionService()
    session = await sessions.create_session(app_name="app1", user_id="alice")
    for event in (
        _event("user", "My sister Ada lives in Oslo"),
        _event("helper", "Nice!"),
        _event("helper", None),  # a tool call: no text, not memory
    ):
        await sessions.append_event(session, event)
    await service.add_session_to_memory(session)
    await sessions.append_event(session, _event("user", "She plays the cello"))
    await service.add_session_to_memory(session)  # again, with one more event

    scope = Scope(tenant="app1", user="alice")
    convs = (await amem.conversations.list(scope)).items
    assert len(convs) == 1
    msgs = await amem.messages.path(scope, convs[0].id)
    assert [(m.role.value, m.content) for m in msgs] == [
        ("user", "My sister Ada lives in Oslo"),
        ("assistant", "Nice!"),
        ("user", "She plays the cello"),
    ]
    found = await service.search_memory(app_name="app1", user_id="alice", query="cello")
    assert _text(found.memories[0]) == "She plays the cello"
    entry = found.memories[0]
    assert entry.author == "user"
    assert entry.custom_metadata["conversation_id"] == convs[0].id
    assert entry.timestamp is not None


async def test_apps_and_users_are_kept_apart(amem: AsyncMemory) -> None:
    service = MemstrataMemoryService(amem)
    await service.add_events_to_memory(
        app_name="app1", user_id="alice", events=[_event("user", "canary-alice-7")], session_id="s"
    )
    for app, user in (("app1", "bob"), ("app2", "alice")):
        found = await service.search_memory(app_name=app, user_id=user, query="canary-alice-7")
        assert all("canary" not in (_text(e) or "") for e in found.memories)
    shared = MemstrataMemoryService(amem, tenant="acme")
    assert shared.scope("anything", "alice") == Scope(tenant="acme", user="alice")
    with pytest.raises(InvalidInput):
        await service.search_memory(app_name="app1", user_id="not a name!", query="x")


async def test_explicit_memories_are_facts(amem: AsyncMemory) -> None:
    service = MemstrataMemoryService(amem)
    entry = MemoryEntry(
        content=types.Content(parts=[types.Part(text="User drinks oat milk")]),
        custom_metadata={"category": "preference"},
    )
    await service.add_memory(app_name="app1", user_id="alice", memories=[entry, entry])
    facts = (await amem.facts.list(Scope(tenant="app1", user="alice"))).items
    assert [(f.content, f.category) for f in facts] == [("User drinks oat milk", "preference")]
    found = await service.search_memory(app_name="app1", user_id="alice", query="oat milk")
    assert found.memories[0].id == f"fact:{facts[0].id}"
    assert found.memories[0].custom_metadata["source"] == "fact"
    await service.delete_memory(app_name="app1", user_id="alice", memory_id=found.memories[0].id)
    assert (await amem.facts.list(Scope(tenant="app1", user="alice"))).items == []
    with pytest.raises(NotImplementedError):
        await service.delete_memory(app_name="app1", user_id="alice", memory_id="msg-id")
    with pytest.raises(InvalidInput):
        await service.add_memory(
            app_name="app1", user_id="alice", memories=[MemoryEntry(content=types.Content())]
        )


def test_example_runs(tmp_path: Path) -> None:
    out = run_example("google_adk_memory.py", tmp_path)
    assert "session 1: Noted." in out
    assert "session 2: You told me you are moving to Ljubljana." in out
    assert "memory: user I am moving to Ljubljana in May." in out
