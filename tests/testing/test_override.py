"""Models handed in: ``Memory.open(llm=...)`` and ``memstrata.testing.override``."""

from __future__ import annotations

from pathlib import Path

import anyio
import pytest

from longterm_support import rule_extractor
from memstrata import AsyncMemory, InvalidInput, Memory, Scope
from memstrata.config import Settings
from memstrata.testing import KEEP, FakeEmbedder, FakeLLM, override

SCOPE = Scope("t1", "u1")


def _open(tmp_path: Path, llm: FakeLLM | None = None) -> Memory:
    settings = Settings(home=tmp_path, worker="off", recall_embed="off")
    return Memory.open(f"sqlite:///{tmp_path / 'm.db'}", settings=settings, llm=llm)


def _extract(mem: Memory) -> list[str]:
    cid = mem.conversations.create(SCOPE).id
    mem.messages.append(SCOPE, cid, role="user", content="I like green tea.")
    mem.messages.append(SCOPE, cid, role="assistant", content="Noted.")
    mem.longterm.flush(SCOPE, cid)
    return [f.content for f in mem.facts.list(SCOPE).items]


def test_open_with_an_llm_extracts_and_compacts_with_it(tmp_path: Path) -> None:
    llm = FakeLLM(rule_extractor)
    with _open(tmp_path, llm=llm) as mem:
        assert mem.memory.planned_by_model
        assert _extract(mem) == ["User likes green tea"]
    assert llm.calls  # the model handed in was the one called


def test_open_with_an_llm_refuses_a_server_url() -> None:
    with pytest.raises(InvalidInput, match="llm"):
        Memory.open("http://127.0.0.1:1", api_key="k", llm=FakeLLM(["x"]))  # type: ignore[call-overload]


def test_async_open_takes_the_same_models(tmp_path: Path) -> None:
    llm, emb = FakeLLM(rule_extractor), FakeEmbedder()

    async def opened() -> tuple[bool, object]:
        settings = Settings(home=tmp_path, worker="off")
        amem = AsyncMemory.open(
            f"sqlite:///{tmp_path / 'a.db'}", settings=settings, llm=llm, embedder=emb
        )
        try:
            return amem.memory.planned_by_model, amem.core.longterm.embedder
        finally:
            await amem.close()

    planned, facts_embedder = anyio.run(opened)
    assert planned
    assert facts_embedder is not None  # recall's embedder, which long-term memory follows


def test_override_swaps_models_for_the_block_and_restores_them(tmp_path: Path) -> None:
    memory_llm, extractor, same = (
        FakeLLM(["### Goal\n- x"]),
        FakeLLM(rule_extractor),
        FakeEmbedder(),
    )
    with _open(tmp_path, llm=memory_llm) as mem:
        kit = mem.longterm.kit
        assert mem.core.context.given_llm is memory_llm
        with override(mem, facts_llm=extractor, facts_embedder=same):
            assert _extract(mem) == ["User likes green tea"]
            assert kit.embedder is same
            with override(mem, llm=None, facts_llm=None):  # nested: no model at all
                assert mem.core.context.llm is None
                assert mem.longterm.kit.llm is None
                assert not mem.memory.planned_by_model
            assert mem.core.context.given_llm is memory_llm
        assert extractor.calls
        assert not memory_llm.calls
        # Back to following the memory's model (not pinned to what it was before).
        assert mem.core.context.given_llm is memory_llm
        assert kit.llm is not None
        other = FakeLLM(rule_extractor)
        with override(mem, llm=other):
            _extract(mem)
        assert other.calls  # long-term memory follows the memory's model again


def test_override_restores_even_when_the_block_raises(tmp_path: Path) -> None:
    def fail(mem: Memory) -> None:
        with override(mem, llm=FakeLLM(["x"]), facts_embedder=None):
            raise RuntimeError("boom")

    with _open(tmp_path) as mem:
        with pytest.raises(RuntimeError):
            fail(mem)
        assert mem.core.context.given_llm is None
        assert not mem.memory.planned_by_model


def test_keep_leaves_a_model_as_it_is(tmp_path: Path) -> None:
    llm = FakeLLM(["x"])
    with _open(tmp_path, llm=llm) as mem, override(mem, llm=KEEP, facts_embedder=None):
        assert mem.core.context.given_llm is llm
        assert repr(KEEP) == "KEEP"
