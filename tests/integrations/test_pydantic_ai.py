"""Pydantic AI on memstrata: message histories come back exactly, memstrata reads them as
its own conversation, and the memory processor puts facts and context in each request."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from integrations.adapters_support import run_example
from lazy_names import lazy
from memstrata import AsyncMemory, Memory, Scope

if TYPE_CHECKING:
    from pydantic_ai import Agent
    from pydantic_ai.messages import (
        ModelMessage,
        ModelMessagesTypeAdapter,
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        TextPart,
        UserPromptPart,
    )
    from pydantic_ai.models.function import AgentInfo, FunctionModel
    from pydantic_ai.models.test import TestModel

    from memstrata.integrations.pydantic_ai import (
        MEMORY_REF,
        MemstrataMessageHistory,
        memory_capability,
        memory_processor,
    )
else:
    (Agent,) = lazy("pydantic_ai", "Agent")
    (
        ModelMessage,
        ModelMessagesTypeAdapter,
        ModelRequest,
        ModelResponse,
        SystemPromptPart,
        TextPart,
        UserPromptPart,
    ) = lazy(
        "pydantic_ai.messages",
        "ModelMessage",
        "ModelMessagesTypeAdapter",
        "ModelRequest",
        "ModelResponse",
        "SystemPromptPart",
        "TextPart",
        "UserPromptPart",
    )
    AgentInfo, FunctionModel = lazy("pydantic_ai.models.function", "AgentInfo", "FunctionModel")
    (TestModel,) = lazy("pydantic_ai.models.test", "TestModel")
    MEMORY_REF, MemstrataMessageHistory, memory_capability, memory_processor = lazy(
        "memstrata.integrations.pydantic_ai",
        "MEMORY_REF",
        "MemstrataMessageHistory",
        "memory_capability",
        "memory_processor",
    )

pytestmark = pytest.mark.anyio
SCOPE = Scope(tenant="t1", user="u1")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _agent() -> Agent[None, str]:
    agent = Agent(TestModel(), instructions="Be helpful.", system_prompt="You are a bot.")

    @agent.tool_plain
    def lookup(city: str) -> str:
        """Look a city up."""
        return f"{city}: sunny"

    return agent


async def test_history_round_trips_exactly(amem: AsyncMemory) -> None:
    history = MemstrataMessageHistory(amem, SCOPE, "user-42-chat")
    agent = _agent()
    first = await agent.run("Weather?", message_history=await history.load())
    await history.save(first.new_messages())
    second = await agent.run("Again", message_history=await history.load())
    await history.save(second.new_messages())

    loaded = await history.load()
    assert loaded == second.all_messages()
    assert ModelMessagesTypeAdapter.dump_json(loaded) == ModelMessagesTypeAdapter.dump_json(
        second.all_messages()
    )
    assert await history.load(limit=2) == loaded[-2:]
    kinds = {p.part_kind for m in loaded for p in m.parts}
    assert {"system-prompt", "user-prompt", "tool-call", "tool-return", "text"} <= kinds


async def test_memstrata_reads_the_agent_conversation(amem: AsyncMemory) -> None:
    history = MemstrataMessageHistory(amem, SCOPE, "view")
    result = await _agent().run("Weather in Porto?")
    await history.save(result.new_messages())
    msgs = await amem.messages.path(SCOPE, history.conversation_id)
    roles = [m.role.value for m in msgs]
    assert roles == ["system", "user", "assistant", "tool", "assistant"]
    assert msgs[1].content == "Weather in Porto?"
    call = msgs[2].tool_calls[0]
    assert call.function.name == "lookup"
    assert msgs[3].tool_call_id == call.id
    assert msgs[3].content.endswith("sunny")
    hits = await amem.recall.search(SCOPE, "Porto")
    assert hits
    assert hits[0].conversation_id == history.conversation_id


async def test_foreign_messages_and_scopes(amem: AsyncMemory) -> None:
    history = MemstrataMessageHistory(amem, SCOPE, "shared")
    other = MemstrataMessageHistory(amem, Scope(tenant="t1", user="bob"), "shared")
    assert other.conversation_id != history.conversation_id
    await history.save([ModelResponse(parts=[TextPart("hello")])])
    await amem.messages.append(SCOPE, history.conversation_id, role="user", content="from REST")
    loaded = await history.load()
    assert isinstance(loaded[1], ModelRequest)
    part = loaded[1].parts[0]
    assert isinstance(part, UserPromptPart)
    assert part.content == "from REST"
    assert await other.load() == []
    await history.clear()
    assert await history.load() == []


def _spy(seen: list[list[ModelMessage]]) -> FunctionModel:
    def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
        seen.append(messages)
        return ModelResponse(parts=[TextPart("ok")])

    return FunctionModel(reply)


def _memory_parts(messages: list[ModelMessage]) -> list[str]:
    return [
        p.content
        for m in messages
        for p in m.parts
        if isinstance(p, SystemPromptPart) and p.dynamic_ref == MEMORY_REF
    ]


async def test_memory_goes_into_each_request_and_never_into_the_history(mem: Memory) -> None:
    mem.facts.add(SCOPE, "User's cat is called Miso", category="context")
    history = MemstrataMessageHistory(mem, SCOPE, "cat-chat")
    seen: list[list[ModelMessage]] = []
    agent = Agent(_spy(seen), capabilities=[memory_capability(mem, SCOPE, history.conversation_id)])
    # First run: no conversation yet, the facts alone.
    first = await agent.run("Name my cat", message_history=await history.load())
    assert len(_memory_parts(seen[-1])) == 1
    assert "Miso" in _memory_parts(seen[-1])[0]
    await history.save(first.new_messages())
    # Second run: memstrata's context for the conversation.
    second = await agent.run("Again", message_history=await history.load())
    parts = _memory_parts(seen[-1])
    assert len(parts) == 1
    assert "<memory>" in parts[0]
    assert "Miso" in parts[0]
    await history.save(second.new_messages())
    assert _memory_parts(await history.load()) == []
    assert all(m.role.value != "system" for m in mem.messages.path(SCOPE, history.conversation_id))


async def test_processor_without_facts_changes_nothing(amem: AsyncMemory) -> None:
    process = memory_processor(amem, SCOPE, "00000000-0000-4000-8000-000000000000")
    messages: list[ModelMessage] = [ModelResponse(parts=[TextPart("x")])]
    assert await process(messages) == messages


def test_example_runs(tmp_path: Path) -> None:
    out = run_example("pydantic_ai_history.py", tmp_path)
    assert "Suggest a dinner. -> How about a mushroom risotto? (no meat)" in out
    assert "What did I ask first? -> You first asked: 'Suggest a dinner.'" in out
    assert "stored messages: 4" in out
