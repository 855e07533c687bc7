"""The embedder port.

An embedder turns texts into vectors of a fixed ``dim``. Its ``identity`` names the
vector space (model, revision, pooling, dimension): vectors are stored with it, and
a search never compares vectors of two identities, so changing the embedder means
re-indexing (``memstrata reindex``), never mixing spaces.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Protocol, runtime_checkable

__all__ = ["Embedder"]


@runtime_checkable
class Embedder(Protocol):
    @property
    def identity(self) -> str:
        """A stable name of the vector space, e.g. ``"all-minilm-l6-v2:384"``."""
        ...

    @property
    def dim(self) -> int: ...

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """One vector per text, in order (need not be normalised; callers normalise)."""
        ...

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        """The same, without blocking the event loop (CPU-bound work runs in a thread)."""
        ...
