"""CrewAI's memory storage protocol on memstrata, and a real CrewAI ``Memory`` over it.

CrewAI cannot be installed beside the dev extras (it pins ``mcp<2``), so these tests run
in their own environment (``make test`` builds ``.venv-crewai``) and skip elsewhere;
with ``MEMSTRATA_TEST_CREWAI=required`` (set by ``make test``) a missing crewai fails.
"""

from __future__ import annotations

import importlib.util
import os
import warnings
import zlib
from datetime import datetime, timedelta
from pathlib import Path
from typing import Any, ClassVar

import pytest

if importlib.util.find_spec("crewai") is None:
    if os.environ.get("MEMSTRATA_TEST_CREWAI") == "required":
        pytest.fail("crewai is required here but not installed", pytrace=False)
    pytest.skip(
        "crewai is not installed here (make test runs these tests in .venv-crewai)",
        allow_module_level=True,
    )

# Nothing may reach the network: no telemetry, and no trace collection (which also stalls
# each of CrewAI's memory flows for seconds when run outside a crew).
os.environ.update(
    CREWAI_DISABLE_TELEMETRY="true", OTEL_SDK_DISABLED="true", CREWAI_TRACING_ENABLED="false"
)
with warnings.catch_warnings():
    # crewai's circular package imports warn (ImportWarning) while loading.
    warnings.simplefilter("ignore", ImportWarning)
    from crewai import Agent, Crew, Task
    from crewai.llms.base_llm import BaseLLM
    from crewai.memory.storage.backend import EmbeddingDimensionMismatchError, StorageBackend
    from crewai.memory.types import MemoryRecord
    from crewai.memory.unified_memory import Memory as CrewMemory

from memstrata import AsyncMemory, Memory, Scope
from memstrata.config import Settings
from memstrata.errors import ConfigurationError, InvalidInput
from memstrata.integrations.crewai import MemstrataStorage, memstrata_embedder

# CrewAI stamps records with datetime.utcnow(), deprecated since Python 3.12.
pytestmark = pytest.mark.filterwarnings("ignore::DeprecationWarning")
ALICE = Scope(tenant="t1", user="alice.smith")


def embed(texts: list[str]) -> list[list[float]]:
    """A deterministic bag-of-words embedder: each word bumps one of 256 dimensions."""
    out = []
    for text in texts:
        vector = [0.0] * 256
        for word in text.lower().split():
            vector[zlib.crc32(word.strip(".,?!").encode()) % 256] += 1.0
        out.append(vector)
    return out


class ScriptedLLM(BaseLLM):
    """Answers CrewAI's memory analysis prompts with fixed, valid structured output, and
    any other prompt (an agent's task) with ``answer``; keeps what it was asked."""

    calls: ClassVar[list[str]] = []
    prompts: ClassVar[list[str]] = []
    answer: str = "nothing is missing"

    def call(
        self,
        messages: Any,
        tools: Any = None,
        callbacks: Any = None,
        available_functions: Any = None,
        from_task: Any = None,
        from_agent: Any = None,
        response_model: Any = None,
    ) -> Any:
        name = response_model.__name__ if response_model is not None else "text"
        self.calls.append(name)
        self.prompts.append(str(messages))
        answers: dict[str, dict[str, Any]] = {
            "MemoryAnalysis": {"suggested_scope": "/notes", "categories": ["note"]},
            "ConsolidationPlan": {"actions": [], "insert_new": True},
            "QueryAnalysis": {"recall_queries": [], "complexity": "simple"},
            "ExtractedMemories": {"memories": [self.answer]},
        }
        if response_model is None:
            return self.answer
        return response_model.model_validate(answers[name])

    def supports_function_calling(self) -> bool:
        return True


def rec(content: str, scope: str = "/", **fields: Any) -> MemoryRecord:
    fields.setdefault("embedding", embed([content])[0])
    return MemoryRecord(content=content, scope=scope, **fields)


@pytest.fixture
def storage(mem: Memory) -> MemstrataStorage:
    return MemstrataStorage(mem, ALICE)


def test_is_a_crewai_storage_backend(storage: MemstrataStorage) -> None:
    assert isinstance(storage, StorageBackend)


def test_save_search_round_trip(storage: MemstrataStorage) -> None:
    tea = rec("alice drinks green tea", "/prefs", categories=["food"], metadata={"k": 1})
    storage.save([tea, rec("the deploy runs on fridays", "/work")])
    found = storage.search(embed(["green tea"])[0])
    assert [(r.content, s) for r, s in found][1:] == [("the deploy runs on fridays", 0.0)]
    assert storage.search(embed(["green tea"])[0], min_score=0.01) == found[:1]
    got, score = found[0]
    assert got.id == tea.id
    assert (got.scope, got.categories, got.metadata) == ("/prefs", ["food"], {"k": 1})
    assert got.created_at == tea.created_at
    assert got.embedding == pytest.approx(tea.embedding)
    assert 0.6 < score <= 1.0


def test_search_filters_limit_and_threshold(storage: MemstrataStorage) -> None:
    storage.save(
        [
            rec("tea one", "/a", categories=["x"], metadata={"src": "chat"}),
            rec("tea two", "/a/b", categories=["y"]),
            rec("tea three", "/ab", categories=["x", "y"]),
            rec("tea four", "/"),
        ]
    )
    query = embed(["tea"])[0]

    def contents(**kwargs: Any) -> list[str]:
        return sorted(r.content for r, _ in storage.search(query, **kwargs))

    assert len(contents()) == 4
    # A scope prefix is a path: /a holds /a and /a/b, not /ab.
    assert contents(scope_prefix="/a") == ["tea one", "tea two"]
    assert contents(scope_prefix="/a/") == ["tea one", "tea two"]
    assert contents(scope_prefix="/") == contents()
    assert contents(categories=["x"]) == ["tea one", "tea three"]
    assert contents(categories=["y"], scope_prefix="/a") == ["tea two"]
    assert contents(metadata_filter={"src": "chat"}) == ["tea one"]
    assert len(storage.search(query, limit=2)) == 2
    scores = [s for _, s in storage.search(query)]
    assert scores == sorted(scores, reverse=True)
    assert contents(min_score=1.01) == []
    with pytest.raises(InvalidInput):
        storage.search(query, limit=0)


def test_records_without_embedding_are_kept_but_not_ranked(storage: MemstrataStorage) -> None:
    bare = MemoryRecord(content="no vector here")
    storage.save([bare])
    assert storage.search(embed(["vector"])[0]) == []
    got = storage.get_record(bare.id)
    assert got is not None
    assert got.content == "no vector here"
    assert got.embedding is None


def test_update_get_record_and_delete(storage: MemstrataStorage) -> None:
    old = rec("meeting at noon", "/cal", created_at=datetime.utcnow() - timedelta(days=3))
    new = rec("meeting at nine", "/cal", categories=["c"], metadata={"m": "x"})
    other = rec("lunch with bob", "/food")
    storage.save([old, new, other])
    assert storage.get_record("missing") is None

    changed = old.model_copy(update={"content": "meeting moved", "scope": "/cal/moved"})
    storage.update(changed)
    got = storage.get_record(old.id)
    assert got is not None
    assert (got.content, got.scope) == ("meeting moved", "/cal/moved")
    assert got.embedding == pytest.approx(old.embedding)  # kept through the update
    assert storage.count() == 3

    assert storage.delete(older_than=datetime.utcnow() - timedelta(days=1)) == 1
    assert storage.get_record(old.id) is None
    assert storage.delete(scope_prefix="/cal", categories=["nope"]) == 0
    assert storage.delete(record_ids=[]) == 0  # an empty id list deletes nothing
    assert storage.delete(metadata_filter={"m": "x"}, scope_prefix="/cal") == 1
    assert storage.delete(record_ids=[other.id, "missing"]) == 1
    assert storage.count() == 0


def test_listing_scopes_categories_and_reset(storage: MemstrataStorage) -> None:
    day = datetime(2026, 1, 1)
    storage.save(
        [
            rec("a", "/crew/research", categories=["x"], created_at=day),
            rec("b", "/crew/research/deep", categories=["x", "y"], created_at=day.replace(day=3)),
            rec("c", "/crew/writing", created_at=day.replace(day=2)),
            rec("d", "/", categories=["z"], created_at=day.replace(day=4)),
        ]
    )
    assert storage.list_scopes() == ["/crew"]
    assert storage.list_scopes("/crew") == ["/crew/research", "/crew/writing"]
    assert storage.list_scopes("/crew/research/deep") == []
    info = storage.get_scope_info("/crew/")
    assert info.path == "/crew"
    assert info.record_count == 3
    assert info.categories == ["x", "y"]
    assert (info.oldest_record, info.newest_record) == (day, day.replace(day=3))
    assert info.child_scopes == ["/crew/research", "/crew/writing"]
    assert storage.get_scope_info("/nowhere").record_count == 0
    assert storage.list_categories() == {"x": 2, "y": 1, "z": 1}
    assert storage.list_categories("/crew/research/deep") == {"x": 1, "y": 1}
    assert [r.content for r in storage.list_records()] == ["d", "b", "c", "a"]
    assert [r.content for r in storage.list_records("/crew", limit=1, offset=1)] == ["c"]
    assert (storage.count(), storage.count("/crew/research")) == (4, 2)
    storage.reset("/crew/research")
    assert sorted(r.content for r in storage.list_records()) == ["c", "d"]
    storage.reset()
    assert storage.count() == 0


def test_scopes_are_kept_apart(mem: Memory) -> None:
    scopes = [
        ALICE,
        Scope(tenant="t1", user="bob"),
        Scope(tenant="t2", user="alice.smith"),
        Scope(tenant="t1", user="alice.smith", agent="planner"),
    ]
    stores = [MemstrataStorage(mem, s) for s in scopes]
    for i, store in enumerate(stores):
        store.save([rec(f"secret {i}")])
    query = embed(["secret"])[0]
    for i, store in enumerate(stores):
        assert [r.content for r, _ in store.search(query)] == [f"secret {i}"]
    stores[0].reset()
    assert [s.count() for s in stores] == [0, 1, 1, 1]


def test_errors_raise(storage: MemstrataStorage) -> None:
    storage.save([rec("four dims", embedding=None)])
    storage.save([MemoryRecord(content="short", embedding=[1.0, 0.0])])
    with pytest.raises(EmbeddingDimensionMismatchError):
        storage.search(embed(["dims"])[0])
    with pytest.raises(EmbeddingDimensionMismatchError):
        storage.save([MemoryRecord(content="a", embedding=[1.0]), rec("b")])
    with pytest.raises(InvalidInput):
        storage.save([rec("bad", metadata={"nul": "\x00"})])
    with pytest.raises(InvalidInput):
        storage.get_record("")


@pytest.mark.anyio
async def test_async_forms(amem: AsyncMemory, mem: Memory) -> None:
    storage = MemstrataStorage(amem, ALICE)
    tea, cake = rec("tea time", "/a", categories=["x"]), rec("cake time", "/b")
    await storage.asave([tea, cake])
    found = await storage.asearch(embed(["tea"])[0], scope_prefix="/a", categories=["x"])
    assert [r.id for r, _ in found] == [tea.id]
    # The sync forms see the same records (one store under both facades).
    assert MemstrataStorage(mem, ALICE).count() == 2
    assert await storage.adelete(scope_prefix="/b") == 1
    assert [r.id for r in storage.list_records()] == [tea.id]
    with pytest.raises(EmbeddingDimensionMismatchError):
        await storage.asearch([1.0, 2.0])


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
def crew_memory(mem: Memory) -> Any:
    memory = CrewMemory(
        storage=MemstrataStorage(mem, ALICE), embedder=embed, llm=ScriptedLLM(model="scripted")
    )
    yield memory
    memory.close()


def test_crewai_memory_remembers_recalls_and_forgets(crew_memory: Any, mem: Memory) -> None:
    ScriptedLLM.calls.clear()
    crew_memory.remember(
        "Alice prefers window seats on long flights",
        scope="/travel",
        categories=["preference"],
        importance=0.9,
    )
    crew_memory.remember("The quarterly report is due on Friday", scope="/work", importance=0.4)
    crew_memory.remember("Alice likes green tea")  # fields left out: the LLM picks them
    assert "MemoryAnalysis" in ScriptedLLM.calls

    for depth in ("shallow", "deep"):
        matches = crew_memory.recall("window seats on flights", depth=depth, limit=2)
        assert matches[0].record.content == "Alice prefers window seats on long flights"
    matches = crew_memory.recall("report due", scope="/work", depth="shallow")
    assert [m.record.content for m in matches] == ["The quarterly report is due on Friday"]

    # The records are memstrata items of the scope (tenant t1, user alice.smith).
    assert crew_memory.list_scopes() == ["/notes", "/travel", "/work"]
    assert crew_memory.info("/").record_count == 3
    assert crew_memory.list_categories() == {"note": 2, "preference": 1}
    assert MemstrataStorage(mem, ALICE).count() == 3

    tea = crew_memory.list_records("/notes")[0]
    updated = crew_memory.update(tea.id, content="Alice likes oolong tea")
    assert crew_memory.recall("oolong tea", depth="shallow")[0].record.id == updated.id
    assert crew_memory.forget(scope="/work") == 1
    crew_memory.reset()
    assert crew_memory.info("/").record_count == 0


def test_crewai_memory_save_errors_reach_the_caller(crew_memory: Any) -> None:
    with pytest.raises(InvalidInput):
        crew_memory.remember(
            "bad metadata", scope="/", categories=["x"], importance=0.5, metadata={"n": "\x00"}
        )


@pytest.mark.anyio
async def test_crewai_memory_async_recall(crew_memory: Any) -> None:
    await crew_memory.aremember("Bob's birthday is in May", scope="/people", categories=["p"])
    matches = await crew_memory.arecall("birthday", depth="shallow")
    assert [m.record.content for m in matches] == ["Bob's birthday is in May"]


def test_a_crew_recalls_before_its_task_and_remembers_after(mem: Memory) -> None:
    llm = ScriptedLLM(model="scripted", answer="The launch review is on Thursday")
    crew_memory = CrewMemory(storage=MemstrataStorage(mem, ALICE), embedder=embed, llm=llm)
    crew_memory.remember(
        "The launch review moved to Thursday", scope="/work", categories=["x"], importance=0.5
    )
    agent = Agent(role="planner", goal="answer questions", backstory="a planner", llm=llm)
    task = Task(description="When is the launch review?", expected_output="a day", agent=agent)
    ScriptedLLM.prompts.clear()
    result = Crew(agents=[agent], tasks=[task], memory=crew_memory).kickoff()
    assert result.raw == "The launch review is on Thursday"
    # The agent's prompt held what memstrata recalled; the crew stored what it learned.
    assert "The launch review moved to Thursday" in ScriptedLLM.prompts[0]
    crew_memory.drain_writes()
    assert sorted(r.content for r in crew_memory.list_records()) == [
        "The launch review is on Thursday",
        "The launch review moved to Thursday",
    ]
    crew_memory.close()


def test_memstrata_embedder_gives_crewai_semantic_recall(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The default embedder (memstrata[embed], offline): a paraphrase with no shared word.
    monkeypatch.delenv("MEMSTRATA_EMBEDDER", raising=False)
    with Memory.open(settings=Settings(home=tmp_path, worker="off")) as mem:
        crew_memory = CrewMemory(
            storage=MemstrataStorage(mem, ALICE),
            embedder=memstrata_embedder(mem),
            llm=ScriptedLLM(model="scripted"),
        )
        for text in ("My daughter loves pottery classes", "The car needs new tyres"):
            crew_memory.remember(text, scope="/", categories=["x"], importance=0.5)
        best = crew_memory.recall("ceramics hobby of my kid", depth="shallow", limit=1)
        assert best[0].record.content == "My daughter loves pottery classes"
        crew_memory.close()
    monkeypatch.setenv("MEMSTRATA_EMBEDDER", "none")
    none = Settings(home=tmp_path / "none", worker="off")
    with Memory.open(settings=none) as bare, pytest.raises(ConfigurationError):
        memstrata_embedder(bare)(["text"])
