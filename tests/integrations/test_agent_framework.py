"""Microsoft Agent Framework providers on memstrata: session history kept exactly per
user and session, and the user's memory in each run's instructions."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from integrations.adapters_support import run_example
from lazy_names import lazy
from memstrata import AsyncMemory, Scope

if TYPE_CHECKING:
    from agent_framework import (
        Agent,
        BaseChatClient,
        ChatResponse,
        Content,
        ContextProvider,
        HistoryProvider,
        Message,
    )

    from memstrata.integrations.agent_framework import (
        MemstrataContextProvider,
        MemstrataHistoryProvider,
    )
else:
    Agent, BaseChatClient, ChatResponse, Content, ContextProvider, HistoryProvider, Message = lazy(
        "agent_framework",
        "Agent",
        "BaseChatClient",
        "ChatResponse",
        "Content",
        "ContextProvider",
        "HistoryProvider",
        "Message",
    )
    MemstrataContextProvider, MemstrataHistoryProvider = lazy(
        "memstrata.integrations.agent_framework",
        "MemstrataContextProvider",
        "MemstrataHistoryProvider",
    )

pytestmark = pytest.mark.anyio
SCOPE = Scope(tenant="t1", user="u1")


def messages() -> list[Message]:
    """A conversation in the framework's own message type (built when a test runs)."""
    return [
        Message(role="system", contents=["Be brief."]),
        Message(role="user", contents=["Weather in Bern? ✓"]),
        Message(
            role="assistant",
            contents=[
                Content.from_function_call(call_id="c1", name="weather", arguments={"c": "Bern"})
            ],
        ),
        Message(role="tool", contents=[Content.from_function_result(call_id="c1", result="snow")]),
        Message(role="assistant", contents=["Snow."]),
    ]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


async def test_history_round_trips(amem: AsyncMemory) -> None:
    history = MemstrataHistoryProvider(amem, SCOPE)
    assert isinstance(history, HistoryProvider)
    await history.save_messages("chat-1", messages()[:2])
    await history.save_messages("chat-1", messages()[2:])
    loaded = await history.get_messages("chat-1")
    assert [m.to_dict() for m in loaded] == [m.to_dict() for m in messages()]
    msgs = await amem.messages.path(SCOPE, history.conversation_id("chat-1"))
    assert [m.role.value for m in msgs] == ["system", "user", "assistant", "tool", "assistant"]
    assert msgs[2].tool_calls[0].function.arguments == '{"c": "Bern"}'
    assert msgs[3].tool_call_id == "c1"
    assert msgs[3].content == "snow"
    other = MemstrataHistoryProvider(amem, Scope(tenant="t1", user="bob"))
    assert await other.get_messages("chat-1") == []
    assert await history.get_messages(None) == []


def _spy() -> Any:
    """A chat client that records the instructions it was sent (made when a test runs)."""

    class _Spy(BaseChatClient):
        def __init__(self) -> None:
            super().__init__()
            self.seen: list[str] = []

        async def _inner_get_response(
            self, *, messages: Any, stream: bool, options: Any, **kw: Any
        ) -> Any:
            self.seen.append(str(options.get("instructions") or ""))
            return ChatResponse(messages=[Message(role="assistant", contents=["ok"])])

    return _Spy()


async def test_context_provider_adds_memory_to_instructions(amem: AsyncMemory) -> None:
    await amem.facts.add(SCOPE, "User is called Noor", category="knowledge")
    old = await amem.conversations.create(SCOPE)
    await amem.messages.append(SCOPE, old.id, role="user", content="my locker number is 318")
    provider = MemstrataContextProvider(amem, SCOPE)
    assert isinstance(provider, ContextProvider)
    spy = _spy()
    agent = Agent(client=spy, context_providers=[provider])
    await agent.run("what is my locker number?")
    assert "User is called Noor" in spy.seen[-1]
    assert "my locker number is 318" in spy.seen[-1]
    # With a conversation: memstrata's context blocks for it.
    with_conv = MemstrataContextProvider(amem, SCOPE, conversation_id=old.id)
    blocks = await with_conv.blocks("locker")
    assert any("<memory>" in b and "Noor" in b for b in blocks)
    nobody = MemstrataContextProvider(amem, Scope(tenant="t1", user="nobody"))
    assert await nobody.blocks("anything") == []


def test_example_runs(tmp_path: Path) -> None:
    out = run_example("agent_framework_memory.py", tmp_path)
    assert "run 1: I'll make it with oat milk." in out
    assert "run 2: Earlier you said: 'One latte, please.'" in out
    assert "memstrata: user What did I order?" in out
