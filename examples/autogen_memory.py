"""An AutoGen agent with memstrata as its memory.

    python examples/autogen_memory.py

No API key is needed: AutoGen's ``ReplayChatCompletionClient`` plays the model. The
agent's run shows the memory it was given (a ``MemoryQueryEvent``): the user's facts and
the past message memstrata recalls for the question.
"""

from __future__ import annotations

import tempfile

import anyio
from autogen_agentchat.agents import AssistantAgent
from autogen_agentchat.messages import MemoryQueryEvent
from autogen_core.memory import MemoryContent, MemoryMimeType
from autogen_ext.models.replay import ReplayChatCompletionClient

from memstrata import Memory, Scope
from memstrata.config import Settings
from memstrata.integrations.autogen import MemstrataMemory


async def main() -> None:
    with tempfile.TemporaryDirectory() as home:
        mem = Memory.open(settings=Settings(home=home, worker="off"))
        scope = Scope(tenant="demo", user="alice")
        # An earlier chat, kept by memstrata.
        old = mem.conversations.create(scope, title="Last week")
        mem.messages.append(scope, old.id, role="user", content="My bike is a blue Brompton.")

        memory = MemstrataMemory(mem, scope)
        await memory.add(
            MemoryContent(
                content="User wants bike sizes in centimetres",
                mime_type=MemoryMimeType.TEXT,
                metadata={"category": "preference"},
            )
        )
        agent = AssistantAgent(
            "helper",
            model_client=ReplayChatCompletionClient(["Your Brompton folds to 58 cm."]),
            memory=[memory],
        )
        result = await agent.run(task="How small does my Brompton bike fold?")
        for message in result.messages:
            if isinstance(message, MemoryQueryEvent):
                for item in message.content:
                    print("memory:", (item.metadata or {}).get("source"), item.content)
        print("answer:", result.messages[-1].to_text())
        await memory.close()
        mem.close()


if __name__ == "__main__":
    anyio.run(main)
