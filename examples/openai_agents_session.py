"""An OpenAI Agents SDK agent whose session lives in memstrata.

    python examples/openai_agents_session.py

No API key is needed: a scripted model (the SDK's ``Model`` interface, as its own tests
fake it) calls a weather tool on the first run and answers from the session history on
the second. The second ``Runner.run`` gets only the new question; the SDK reads the
earlier turn, tool call and tool output included, back from memstrata.
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncIterator
from typing import Any

import anyio
from agents import Agent, Model, ModelResponse, Runner, Usage, function_tool, set_tracing_disabled
from openai.types.responses import (
    ResponseFunctionToolCall,
    ResponseOutputMessage,
    ResponseOutputText,
)

from memstrata import Memory, Scope
from memstrata.config import Settings
from memstrata.integrations.openai_agents import MemstrataSession


def _say(text: str) -> ResponseOutputMessage:
    return ResponseOutputMessage(
        id="msg_1",
        type="message",
        role="assistant",
        status="completed",
        content=[ResponseOutputText(type="output_text", text=text, annotations=[])],
    )


class ScriptedModel(Model):
    """Calls the weather tool for a new question, then answers from what it sees."""

    async def get_response(self, system_instructions: Any, input: Any, *a: Any, **k: Any) -> Any:
        items = [{"role": "user", "content": input}] if isinstance(input, str) else input
        last = items[-1]
        if last.get("type") == "function_call_output":
            out: Any = _say(f"It is {last['output']} in Lisbon.")
        elif "weather" in str(last.get("content")):
            out = ResponseFunctionToolCall(
                id="fc_1",
                type="function_call",
                call_id="call_1",
                name="weather",
                arguments='{"city": "Lisbon"}',
            )
        else:
            asked = [i["content"] for i in items if i.get("role") == "user"]
            out = _say(f"Earlier you asked: {asked[0]!r}")
        return ModelResponse(output=[out], usage=Usage(), response_id=None)

    def stream_response(self, *a: Any, **k: Any) -> AsyncIterator[Any]:
        raise NotImplementedError("this example does not stream")


@function_tool
def weather(city: str) -> str:
    """The weather in a city."""
    return "sunny, 24 C"


async def main() -> None:
    set_tracing_disabled(True)  # tracing would upload to OpenAI
    agent = Agent(name="helper", model=ScriptedModel(), tools=[weather])
    with tempfile.TemporaryDirectory() as home:
        mem = Memory.open(settings=Settings(home=home, worker="off"))
        scope = Scope(tenant="demo", user="alice")
        session = MemstrataSession("alice-travel-chat", mem, scope)

        first = await Runner.run(agent, "What is the weather in Lisbon?", session=session)
        print("run 1:", first.final_output)
        second = await Runner.run(agent, "What did I ask you before?", session=session)
        print("run 2:", second.final_output)

        for item in await session.get_items():
            print("item:", item.get("type", "message"), item.get("role", ""))
        # The same turns, as memstrata keeps them (the tool call is an assistant tool call).
        for m in mem.history(scope, session.conversation_id, max_tokens=None).messages:
            print("memstrata:", m.role.value, m.content or m.tool_calls[0].function.name)
        mem.close()


if __name__ == "__main__":
    anyio.run(main)
