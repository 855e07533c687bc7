"""Recall tests with the default embedder (offline: its weights ship with the package)."""

from __future__ import annotations

import pytest

from memstrata import Memory
from memstrata.embeddings import Embedder, get_embedder


@pytest.fixture(scope="session")
def minilm() -> Embedder:
    # The gate is calibrated for the default embedder: the realistic cases use it.
    emb = get_embedder()
    assert emb is not None
    return emb


@pytest.fixture
def real(memory: Memory, minilm: Embedder) -> Memory:
    """The memory fixture with the default embedder and no automatic compaction."""
    memory.core.recall.use(minilm)
    memory.core.context.auto_compact = False
    return memory
