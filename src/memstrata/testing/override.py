"""Swap a memory's models for a block of test code, and put the previous ones back."""

from __future__ import annotations

from collections.abc import Iterator
from contextlib import contextmanager
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    from memstrata.embeddings.port import Embedder
    from memstrata.llm import LLM

__all__ = ["KEEP", "override"]


class _Keep:
    def __repr__(self) -> str:
        return "KEEP"


#: The default of every :func:`override` argument: leave that model as it is.
KEEP: Any = _Keep()


@contextmanager
def override(
    memory: Any,
    *,
    llm: LLM | None = KEEP,
    facts_llm: LLM | None = KEEP,
    facts_embedder: Embedder | None = KEEP,
) -> Iterator[None]:
    """Inside the block, ``memory`` (a ``Memory`` or ``AsyncMemory``) uses the given models;
    on exit the previous ones are back. None means "no model"; an argument left out keeps
    what is there.

    ``llm`` is the memory's model (what ``Memory.open(llm=...)`` sets): compaction uses it,
    and long-term extraction and consolidation do too unless ``facts_llm`` is given.
    ``facts_embedder`` finds near-duplicate facts (default: recall's embedder; None: exact
    keys only, no embedding model loaded). Recall's own embedder is chosen when the memory
    opens (``Memory.open(embedder=...)``)::

        with override(mem, facts_llm=FakeLLM(['{"newFacts": []}']), facts_embedder=None):
            ...
    """
    core = memory.core
    context, longterm = core.context, core.longterm
    before_llm, before_models = context.given_llm, longterm.own_models()
    try:
        if llm is not KEEP:
            context.llm = llm
        if facts_llm is not KEEP:
            longterm.llm = facts_llm
        if facts_embedder is not KEEP:
            longterm.embedder = facts_embedder
        yield
    finally:
        context.llm = before_llm
        longterm.restore_models(before_models)
