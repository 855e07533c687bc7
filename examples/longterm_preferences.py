"""Long-term memory end to end: preferences stated in one conversation reach the next.

Run against any OpenAI-compatible endpoint:

    MEMSTRATA_LLM_BASE_URL=http://localhost:11434/v1 MEMSTRATA_LLM_MODEL=llama3.1 \
        python examples/longterm_preferences.py

It opens a fresh embedded memory in a temporary directory, talks, extracts, and prints
the context of a new conversation. In an application the background worker runs the
extraction once the conversation has been quiet for MEMSTRATA_LONGTERM_DEBOUNCE_SECONDS;
here ``flush`` runs it at once so the script is deterministic.
"""

from __future__ import annotations

import sys
import tempfile

from memstrata import Memory, Scope
from memstrata.config import Settings


def main() -> int:
    with tempfile.TemporaryDirectory() as home:
        settings = Settings(home=home, longterm_capture=True)
        if not settings.llm_model:
            print("set MEMSTRATA_LLM_MODEL (and MEMSTRATA_LLM_BASE_URL)", file=sys.stderr)
            return 2
        mem = Memory.open(settings=settings)
        alice = Scope(tenant="demo", user="alice")

        # Monday: Alice mentions how she likes things.
        monday = mem.conversations.create(alice, title="Trip planning")
        mem.messages.append(
            alice, monday.id, role="user", content="I prefer window seats. I like vegetarian food."
        )
        mem.messages.append(
            alice, monday.id, role="assistant", content="Noted: window seat, vegetarian meals."
        )
        result = mem.longterm.flush(alice, monday.id)
        print(f"extraction: {result.outcome}, {result.counts}")
        for fact in mem.facts.list(alice).items:
            print(f"fact: [{fact.category} {fact.confidence:.2f}] {fact.content}")

        # Tuesday: a new conversation. Its context carries what Monday taught.
        tuesday = mem.conversations.create(alice, title="Booking")
        mem.messages.append(alice, tuesday.id, role="user", content="Book me a flight to Oslo.")
        ctx = mem.context(alice, tuesday.id, budget=4000)
        for message in ctx.messages:
            print(f"--- {message['role']}\n{message['content']}")
        mem.close()
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
