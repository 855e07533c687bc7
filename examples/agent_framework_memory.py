"""A Microsoft Agent Framework agent with memstrata history and memory.

    python examples/agent_framework_memory.py

No API key is needed: a scripted chat client (the framework's ``BaseChatClient``, as its
own docs show a custom client) answers from the messages and instructions it is sent.
"""

from __future__ import annotations

import tempfile
from typing import Any

import anyio
from agent_framework import Agent, BaseChatClient, ChatResponse, Message

from memstrata import Memory, Scope
from memstrata.config import Settings
from memstrata.integrations.agent_framework import (
    MemstrataContextProvider,
    MemstrataHistoryProvider,
)


class ScriptedClient(BaseChatClient):
    """Says what it knows: facts from its instructions, earlier questions from history."""

    async def _inner_get_response(
        self, *, messages: Any, stream: bool, options: Any, **kw: Any
    ) -> Any:
        seen = "\n".join(m.text or "" for m in messages)
        seen += str(options.get("instructions") or "")
        asked = [m.text for m in messages if str(m.role) == "user"]
        if "oat milk" in seen and len(asked) == 1:
            text = "I'll make it with oat milk."
        else:
            text = f"Earlier you said: {asked[0]!r}"
        return ChatResponse(messages=[Message(role="assistant", contents=[text])])


async def main() -> None:
    with tempfile.TemporaryDirectory() as home:
        mem = Memory.open(settings=Settings(home=home, worker="off"))
        scope = Scope(tenant="demo", user="alice")
        mem.facts.add(scope, "User drinks oat milk", category="preference")

        history = MemstrataHistoryProvider(mem, scope)
        agent = Agent(
            client=ScriptedClient(),
            name="barista",
            context_providers=[history, MemstrataContextProvider(mem, scope)],
        )
        session = agent.create_session(session_id="alice-coffee")
        print("run 1:", (await agent.run("One latte, please.", session=session)).text)
        print("run 2:", (await agent.run("What did I order?", session=session)).text)
        cid = history.conversation_id("alice-coffee")
        for m in mem.history(scope, cid, max_tokens=None).messages:
            print("memstrata:", m.role.value, m.content)
        mem.close()


if __name__ == "__main__":
    anyio.run(main)
