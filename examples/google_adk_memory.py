"""A Google ADK agent with memstrata as its memory service.

    python examples/google_adk_memory.py

No API key is needed: a scripted ``BaseLlm`` plays the model and answers from what ADK
sends it. The first session is added to memory; in a second session ADK's
``preload_memory`` tool searches memstrata and the model sees the earlier turn.
"""

from __future__ import annotations

import tempfile
from collections.abc import AsyncGenerator

import anyio
from google.adk.agents import LlmAgent
from google.adk.models import BaseLlm, LlmRequest, LlmResponse
from google.adk.runners import Runner
from google.adk.sessions import InMemorySessionService
from google.adk.tools import preload_memory
from google.genai import types

from memstrata import Memory
from memstrata.config import Settings
from memstrata.integrations.google_adk import MemstrataMemoryService


class ScriptedLlm(BaseLlm):
    """Answers with what it was told about past conversations, if anything."""

    async def generate_content_async(
        self, llm_request: LlmRequest, stream: bool = False
    ) -> AsyncGenerator[LlmResponse, None]:
        seen = "\n".join(p.text or "" for c in llm_request.contents for p in c.parts or ())
        if "<PAST_CONVERSATIONS>" in seen and "Ljubljana" in seen:
            text = "You told me you are moving to Ljubljana."
        else:
            text = "Noted."
        yield LlmResponse(content=types.Content(role="model", parts=[types.Part(text=text)]))


async def ask(runner: Runner, session_id: str, text: str) -> str:
    message = types.Content(role="user", parts=[types.Part(text=text)])
    answer = ""
    async for event in runner.run_async(
        user_id="alice", session_id=session_id, new_message=message
    ):
        if event.is_final_response() and event.content and event.content.parts:
            answer = event.content.parts[0].text or ""
    return answer


async def main() -> None:
    with tempfile.TemporaryDirectory() as home:
        mem = Memory.open(settings=Settings(home=home, worker="off"))
        memory_service = MemstrataMemoryService(mem)
        sessions = InMemorySessionService()
        agent = LlmAgent(name="helper", model=ScriptedLlm(model="scripted"), tools=[preload_memory])
        runner = Runner(
            app_name="demo", agent=agent, session_service=sessions, memory_service=memory_service
        )

        first = await sessions.create_session(app_name="demo", user_id="alice")
        print("session 1:", await ask(runner, first.id, "I am moving to Ljubljana in May."))
        done = await sessions.get_session(app_name="demo", user_id="alice", session_id=first.id)
        assert done is not None
        await memory_service.add_session_to_memory(done)

        second = await sessions.create_session(app_name="demo", user_id="alice")
        print("session 2:", await ask(runner, second.id, "Where am I moving to?"))
        found = await memory_service.search_memory(app_name="demo", user_id="alice", query="moving")
        for entry in found.memories:
            print("memory:", entry.author, entry.content.parts[0].text)
        mem.close()


if __name__ == "__main__":
    anyio.run(main)
