"""LangGraph on memstrata: a checkpointer and a store.

- :class:`MemstrataSaver` / :class:`AsyncMemstrataSaver`: LangGraph's
  ``BaseCheckpointSaver`` on ``mem.graphs`` (see :mod:`.saver`); a graph's
  ``messages`` state is also kept as a memstrata conversation.
- :class:`MemstrataStore`: LangGraph's ``BaseStore`` (see :mod:`.store`).

Needs ``pip install 'memstrata[langgraph]'``; importing this package without it raises
:class:`~memstrata.errors.MissingDependency`.
"""

from __future__ import annotations

from memstrata.errors import MissingDependency

try:
    import langgraph.checkpoint.base
    import langgraph.store.base  # noqa: F401
except ImportError:
    raise MissingDependency(
        "the LangGraph integration needs langgraph: pip install 'memstrata[langgraph]'"
    ) from None

from memstrata.integrations.langgraph.saver import AsyncMemstrataSaver, MemstrataSaver
from memstrata.integrations.langgraph.store import (
    MemstrataStore,
    facts_namespace,
    working_namespace,
)

__all__ = [
    "AsyncMemstrataSaver",
    "MemstrataSaver",
    "MemstrataStore",
    "facts_namespace",
    "working_namespace",
]
