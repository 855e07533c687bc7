"""AutoGen's Memory interface on memstrata: facts in, facts and recall out, and the
user's memory in the model context before each call."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from integrations.adapters_support import run_example
from lazy_names import lazy
from memstrata import AsyncMemory, Scope
from memstrata.errors import InvalidInput

if TYPE_CHECKING:
    from autogen_core.memory import Memory, MemoryContent, MemoryMimeType
    from autogen_core.model_context import UnboundedChatCompletionContext
    from autogen_core.models import SystemMessage, UserMessage

    from memstrata.integrations.autogen import MemstrataMemory
else:
    Memory, MemoryContent, MemoryMimeType = lazy(
        "autogen_core.memory", "Memory", "MemoryContent", "MemoryMimeType"
    )
    (UnboundedChatCompletionContext,) = lazy(
        "autogen_core.model_context", "UnboundedChatCompletionContext"
    )
    SystemMessage, UserMessage = lazy("autogen_core.models", "SystemMessage", "UserMessage")
    (MemstrataMemory,) = lazy("memstrata.integrations.autogen", "MemstrataMemory")

pytestmark = pytest.mark.anyio
SCOPE = Scope(tenant="t1", user="u1")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _text(value: str, **meta: str) -> MemoryContent:
    return MemoryContent(content=value, mime_type=MemoryMimeType.TEXT, metadata=meta or None)


async def test_add_query_clear(amem: AsyncMemory) -> None:
    memory = MemstrataMemory(amem, SCOPE)
    assert isinstance(memory, Memory)
    await memory.add(_text("User's dog is named Pixel", category="knowledge"))
    await memory.add(_text("User's dog is named Pixel"))  # the same fact again: no-op
    await memory.add(MemoryContent(content={"likes": "tea"}, mime_type=MemoryMimeType.JSON))
    facts = (await amem.facts.list(SCOPE)).items
    assert sorted((f.content, f.category) for f in facts) == [
        ("User's dog is named Pixel", "knowledge"),
        ('{"likes": "tea"}', "context"),
    ]
    found = await memory.query("what is my dog called")
    assert [r.content for r in found.results] == ["User's dog is named Pixel"]
    assert found.results[0].metadata is not None
    assert found.results[0].metadata["source"] == "fact"
    assert len((await memory.query("")).results) == 2
    await memory.clear()
    assert (await amem.facts.list(SCOPE)).items == []
    await memory.close()


async def test_query_recalls_past_messages_of_this_user_only(amem: AsyncMemory) -> None:
    conv = await amem.conversations.create(SCOPE)
    await amem.messages.append(SCOPE, conv.id, role="user", content="I planted tomatoes")
    bob = Scope(tenant="t1", user="bob")
    bconv = await amem.conversations.create(bob)
    await amem.messages.append(bob, bconv.id, role="user", content="bob canary tomatoes")
    found = await MemstrataMemory(amem, SCOPE).query("tomatoes")
    recalled = [r for r in found.results if r.metadata and r.metadata["source"] == "recall"]
    assert [r.content for r in recalled] == ["I planted tomatoes"]
    assert recalled[0].metadata is not None
    assert recalled[0].metadata["conversation_id"] == conv.id


async def test_refuses_what_it_cannot_store(amem: AsyncMemory) -> None:
    memory = MemstrataMemory(amem, SCOPE)
    with pytest.raises(InvalidInput):
        await memory.add(MemoryContent(content=b"\x00", mime_type=MemoryMimeType.BINARY))
    with pytest.raises(InvalidInput):
        await memory.add(_text("x", category="nonsense"))
    assert (await amem.facts.list(SCOPE)).items == []


async def test_update_context_without_a_conversation(amem: AsyncMemory) -> None:
    conv = await amem.conversations.create(SCOPE)
    await amem.messages.append(SCOPE, conv.id, role="user", content="The garage code is 4711")
    memory = MemstrataMemory(amem, SCOPE)
    await memory.add(_text("User lives in Graz"))
    ctx = UnboundedChatCompletionContext()
    await ctx.add_message(UserMessage(content="what is the garage code?", source="user"))
    result = await memory.update_context(ctx)
    added = (await ctx.get_messages())[-1]
    assert isinstance(added, SystemMessage)
    assert "User lives in Graz" in added.content
    assert "The garage code is 4711" in added.content
    assert any(r.content == "The garage code is 4711" for r in result.memories.results)


async def test_update_context_with_the_conversation(amem: AsyncMemory) -> None:
    conv = await amem.conversations.create(SCOPE)
    await amem.messages.append(SCOPE, conv.id, role="user", content="hello")
    await amem.facts.add(SCOPE, "User is allergic to peanuts", category="context")
    memory = MemstrataMemory(amem, SCOPE, conversation_id=conv.id)
    ctx = UnboundedChatCompletionContext()
    await ctx.add_message(UserMessage(content="snack ideas?", source="user"))
    await memory.update_context(ctx)
    added = (await ctx.get_messages())[-1]
    assert isinstance(added, SystemMessage)
    assert "<memory>" in added.content
    assert "peanuts" in added.content
    # Nothing to add: the context is left alone.
    empty = MemstrataMemory(amem, Scope(tenant="t1", user="nobody"))
    ctx2 = UnboundedChatCompletionContext()
    await empty.update_context(ctx2)
    assert await ctx2.get_messages() == []


def test_example_runs(tmp_path: Path) -> None:
    out = run_example("autogen_memory.py", tmp_path)
    assert "memory: fact User wants bike sizes in centimetres" in out
    assert "memory: recall My bike is a blue Brompton." in out
    assert "answer: Your Brompton folds to 58 cm." in out
