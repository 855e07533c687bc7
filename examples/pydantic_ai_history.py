"""A Pydantic AI agent whose history lives in memstrata and whose requests carry memory.

    python examples/pydantic_ai_history.py

No API key is needed: Pydantic AI's ``FunctionModel`` plays the model. It answers from
what it is sent, so the output shows what memstrata added: the user's facts (as a
system prompt part) and, on the second run, the first run's turn loaded back.
"""

from __future__ import annotations

import tempfile

import anyio
from pydantic_ai import Agent
from pydantic_ai.messages import ModelMessage, ModelResponse, TextPart
from pydantic_ai.models.function import AgentInfo, FunctionModel

from memstrata import Memory, Scope
from memstrata.config import Settings
from memstrata.integrations.pydantic_ai import MemstrataMessageHistory, memory_capability


def reply(messages: list[ModelMessage], info: AgentInfo) -> ModelResponse:
    parts = [p for m in messages for p in m.parts]
    system = " ".join(p.content for p in parts if p.part_kind == "system-prompt")
    prompts = [p.content for p in parts if p.part_kind == "user-prompt"]
    if "vegetarian" in system and len(prompts) == 1:
        return ModelResponse(parts=[TextPart("How about a mushroom risotto? (no meat)")])
    return ModelResponse(parts=[TextPart(f"You first asked: {prompts[0]!r}")])


async def main() -> None:
    with tempfile.TemporaryDirectory() as home:
        mem = Memory.open(settings=Settings(home=home, worker="off"))
        scope = Scope(tenant="demo", user="alice")
        mem.facts.add(scope, "User is vegetarian", category="preference")

        history = MemstrataMessageHistory(mem, scope, "alice-dinner")
        agent = Agent(
            FunctionModel(reply),
            capabilities=[memory_capability(mem, scope, history.conversation_id)],
        )
        for prompt in ("Suggest a dinner.", "What did I ask first?"):
            result = await agent.run(prompt, message_history=await history.load())
            await history.save(result.new_messages())
            print(f"{prompt} -> {result.output}")

        print("stored messages:", len(await history.load()))
        for m in mem.history(scope, history.conversation_id, max_tokens=None).messages:
            print("memstrata:", m.role.value, m.content)
        mem.close()


if __name__ == "__main__":
    anyio.run(main)
