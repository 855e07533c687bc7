"""LlamaIndex on memstrata: the chat store keeps messages exactly per key and user; the
memory blocks give facts and recalled messages to LlamaIndex's Memory."""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING

import pytest

from integrations.adapters_support import run_example
from lazy_names import lazy
from memstrata import AsyncMemory, Memory, Scope

if TYPE_CHECKING:
    from llama_index.core.llms import ChatMessage, MessageRole
    from llama_index.core.memory import Memory as LlamaMemory

    from memstrata.integrations.llamaindex import (
        MemstrataChatStore,
        MemstrataFactsBlock,
        MemstrataRecallBlock,
    )
else:
    ChatMessage, MessageRole = lazy("llama_index.core.llms", "ChatMessage", "MessageRole")
    (LlamaMemory,) = lazy("llama_index.core.memory", "Memory")
    MemstrataChatStore, MemstrataFactsBlock, MemstrataRecallBlock = lazy(
        "memstrata.integrations.llamaindex",
        "MemstrataChatStore",
        "MemstrataFactsBlock",
        "MemstrataRecallBlock",
    )

pytestmark = pytest.mark.anyio
SCOPE = Scope(tenant="t1", user="u1")


def messages() -> list[ChatMessage]:
    """A conversation in the framework's own message type (built when a test runs)."""
    return [
        ChatMessage(role=MessageRole.SYSTEM, content="Be brief."),
        ChatMessage(role=MessageRole.USER, content="Weather in Graz? ✓"),
        ChatMessage(
            role=MessageRole.ASSISTANT,
            content="",
            additional_kwargs={
                "tool_calls": [{"id": "c1", "function": {"name": "weather", "arguments": "{}"}}]
            },
        ),
        ChatMessage(
            role=MessageRole.TOOL, content="rain", additional_kwargs={"tool_call_id": "c1", "n": 1}
        ),
        ChatMessage(role=MessageRole.ASSISTANT, content="It rains."),
    ]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_chat_store_round_trip_and_edits(mem: Memory) -> None:
    store = MemstrataChatStore(mem, SCOPE)
    store.set_messages("chat-a", messages())
    assert store.get_messages("chat-a") == messages()
    store.add_message("chat-a", ChatMessage(role=MessageRole.USER, content="thanks"))
    assert store.delete_last_message("chat-a") == ChatMessage(role="user", content="thanks")
    assert store.get_messages("chat-a") == messages()
    assert store.delete_message("chat-a", 0) == messages()[0]
    assert store.delete_message("chat-a", 99) is None
    assert store.get_messages("chat-a") == messages()[1:]
    store.set_messages("chat-b", messages()[:1])
    assert sorted(store.get_keys()) == ["chat-a", "chat-b"]
    assert store.delete_messages("chat-b") == messages()[:1]
    assert store.delete_messages("chat-b") is None
    assert store.get_keys() == ["chat-a"]
    # memstrata reads the chat as its own conversation.
    cid = store._cid("chat-a")
    msgs = mem.messages.path(SCOPE, cid)
    assert [(m.role.value, m.content) for m in msgs][:2] == [
        ("user", "Weather in Graz? ✓"),
        ("assistant", "[assistant]"),
    ]
    assert msgs[2].tool_call_id == "c1"


def test_chat_store_keys_are_per_user(mem: Memory) -> None:
    MemstrataChatStore(mem, SCOPE).add_message("k", messages()[1])
    other = MemstrataChatStore(mem, Scope(tenant="t1", user="bob"))
    assert other.get_messages("k") == []
    assert other.get_keys() == []
    assert other.delete_last_message("k") is None


async def test_chat_store_async_forms(amem: AsyncMemory) -> None:
    store = MemstrataChatStore(amem, SCOPE)
    await store.aset_messages("a", messages()[:2])
    await store.async_add_message("a", messages()[4])
    assert await store.aget_messages("a") == [*messages()[:2], messages()[4]]
    assert await store.adelete_last_message("a") == messages()[4]
    assert await store.adelete_message("a", 0) == messages()[0]
    assert await store.aget_keys() == ["a"]
    assert await store.adelete_messages("a") == messages()[1:2]


async def test_memory_blocks_in_llamaindex_memory(amem: AsyncMemory) -> None:
    await amem.facts.add(SCOPE, "User's bike is a Brompton", category="knowledge")
    old = await amem.conversations.create(SCOPE)
    await amem.messages.append(SCOPE, old.id, role="user", content="The boat is called Ilse")
    recall = MemstrataRecallBlock(memory=amem, scope=SCOPE, k=3)
    memory = LlamaMemory.from_defaults(
        session_id="s1",
        token_limit=4000,
        memory_blocks=[MemstrataFactsBlock(memory=amem, scope=SCOPE), recall],
    )
    await memory.aput(ChatMessage(role="user", content="what is the boat called?"))
    system = (await memory.aget())[0]
    assert system.role is MessageRole.SYSTEM
    assert "User's bike is a Brompton" in str(system.content)
    assert "user: The boat is called Ilse" in str(system.content)
    # Messages let go of by short-term memory stay findable.
    await recall.aput([ChatMessage(role="user", content="The kayak is green")])
    assert "The kayak is green" in await recall.aget(
        [ChatMessage(role="user", content="kayak colour")]
    )
    assert await recall.aget([]) == ""
    empty = MemstrataFactsBlock(memory=amem, scope=Scope(tenant="t1", user="nobody"))
    assert await empty.aget() == ""


def test_example_runs(tmp_path: Path) -> None:
    out = run_example("llamaindex_memory.py", tmp_path)
    assert "stored: ['user', 'assistant']" in out
    assert "keys: ['alice-chat']" in out
    assert "[knowledge | 1.00] User climbs grade 7a" in out
    assert "user: My favourite climbing crag is Frankenjura." in out
