"""CrewAI's memory kept in memstrata.

    pip install 'memstrata[crewai]'   # in an environment of its own: see docs/integrations.md
    python examples/crewai_memory.py

No API key is needed: a bag-of-words embedder and a rule-based model stand in for
CrewAI's default OpenAI ones (use any CrewAI embedder and LLM instead). The records
CrewAI remembers are memstrata items of one user, found again by a new CrewAI memory
(another process would find them the same way) and kept apart from another user's.
"""

from __future__ import annotations

import os
import tempfile
import zlib
from typing import Any

# Offline: no CrewAI telemetry or trace collection.
os.environ.update(
    CREWAI_DISABLE_TELEMETRY="true", OTEL_SDK_DISABLED="true", CREWAI_TRACING_ENABLED="false"
)

from crewai import Memory as CrewMemory
from crewai.events.event_listener import event_listener
from crewai.llms.base_llm import BaseLLM

from memstrata import Memory, Scope
from memstrata.config import Settings
from memstrata.integrations.crewai import MemstrataStorage


def embed(texts: list[str]) -> list[list[float]]:
    """Each word bumps one of 256 dimensions (deterministic, for the demo)."""
    vectors = []
    for text in texts:
        vector = [0.0] * 256
        for word in text.lower().split():
            vector[zlib.crc32(word.strip(".,?!'s").encode()) % 256] += 1.0
        vectors.append(vector)
    return vectors


class RuleModel(BaseLLM):
    """Answers CrewAI's memory prompts: a scope and category from keywords, and never
    merges records (a demo stand-in for a real model)."""

    def call(self, messages: Any, *args: Any, response_model: Any = None, **kw: Any) -> Any:
        text = str(messages).lower()
        if response_model is None:
            return "Nothing is missing."
        if response_model.__name__ == "MemoryAnalysis":
            topic = "travel" if "flight" in text or "seat" in text else "general"
            return response_model(suggested_scope=f"/{topic}", categories=[topic])
        if response_model.__name__ == "ConsolidationPlan":
            return response_model(actions=[], insert_new=True)
        return response_model()

    def supports_function_calling(self) -> bool:
        return True


def main() -> None:
    event_listener.formatter.verbose = False  # keep CrewAI's console panels out of the way
    with tempfile.TemporaryDirectory() as home:
        mem = Memory.open(settings=Settings(home=home, worker="off"))
        alice = Scope(tenant="demo", user="alice")

        crew_memory = CrewMemory(
            storage=MemstrataStorage(mem, alice), embedder=embed, llm=RuleModel(model="rules")
        )
        crew_memory.remember("Alice always books an aisle seat on long flights")
        crew_memory.remember(
            "The launch review moved to Thursday",
            scope="/work",
            categories=["schedule"],
            importance=0.8,
        )
        crew_memory.close()

        # A new CrewAI memory over the same memstrata scope finds what was remembered.
        again = CrewMemory(
            storage=MemstrataStorage(mem, alice), embedder=embed, llm=RuleModel(model="rules")
        )
        print("scopes:", again.list_scopes())
        for query, expected in (
            ("which seat on flights?", "Alice always books an aisle seat on long flights"),
            ("when is the launch review?", "The launch review moved to Thursday"),
        ):
            best = again.recall(query, depth="shallow", limit=1)[0]
            print(f"recall {query!r}: {best.record.content} [{best.record.scope}]")
            assert best.record.content == expected

        # Another user of the same app sees none of it.
        bob = CrewMemory(
            storage=MemstrataStorage(mem, Scope(tenant="demo", user="bob")),
            embedder=embed,
            llm=RuleModel(model="rules"),
        )
        assert bob.recall("seat", depth="shallow") == []
        print("bob's memory:", bob.info("/").record_count, "records")
        again.close()
        bob.close()
        mem.close()


if __name__ == "__main__":
    main()
