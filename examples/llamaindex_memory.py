"""LlamaIndex with memstrata: a chat store for the chat history, memory blocks for the
user's facts and past messages.

    python examples/llamaindex_memory.py

No API key is needed: LlamaIndex's ``MockLLM`` plays the model (it echoes its prompt).
"""

from __future__ import annotations

import tempfile

import anyio
from llama_index.core.chat_engine import SimpleChatEngine
from llama_index.core.llms import ChatMessage, MockLLM
from llama_index.core.memory import ChatMemoryBuffer
from llama_index.core.memory import Memory as LlamaMemory

from memstrata import Memory, Scope
from memstrata.config import Settings
from memstrata.integrations.llamaindex import (
    MemstrataChatStore,
    MemstrataFactsBlock,
    MemstrataRecallBlock,
)


async def main() -> None:
    with tempfile.TemporaryDirectory() as home:
        mem = Memory.open(settings=Settings(home=home, worker="off"))
        scope = Scope(tenant="demo", user="alice")

        # 1. The chat history of a chat engine, kept in memstrata.
        store = MemstrataChatStore(mem, scope)
        buffer = ChatMemoryBuffer.from_defaults(chat_store=store, chat_store_key="alice-chat")
        engine = SimpleChatEngine.from_defaults(llm=MockLLM(max_tokens=8), memory=buffer)
        engine.chat("My favourite climbing crag is Frankenjura.")
        print("stored:", [m.role.value for m in store.get_messages("alice-chat")])
        print("keys:", store.get_keys())

        # 2. Memory blocks: the user's facts and what recall finds for the new message.
        mem.facts.add(scope, "User climbs grade 7a", category="knowledge")
        memory = LlamaMemory.from_defaults(
            session_id="alice-new-chat",
            token_limit=4000,
            memory_blocks=[
                MemstrataFactsBlock(mem, scope=scope),
                MemstrataRecallBlock(mem, scope=scope, k=2),
            ],
        )
        await memory.aput(ChatMessage(role="user", content="Which crag do I like?"))
        for message in await memory.aget():
            print(f"{message.role.value}: {message.content}")
        mem.close()


if __name__ == "__main__":
    anyio.run(main)
