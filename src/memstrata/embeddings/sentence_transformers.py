"""An adapter for models run by the ``sentence-transformers`` package (optional).

For any model that package can load (local paths, or hub names when the machine may
download them); it brings torch, so it is an extra of its own and imported only when
the first text is embedded (``pip install sentence-transformers``). The default
embedder needs neither.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from typing import Any

import numpy as np

from memstrata.errors import ConfigurationError, MissingDependency

__all__ = ["SentenceTransformerEmbedder"]

INSTALL_HINT = 'pip install "memstrata[sentence-transformers]"'


def _default_factory(name: str, device: str | None) -> Any:
    try:
        from sentence_transformers import SentenceTransformer
    except ImportError as exc:
        raise MissingDependency(
            f"the sentence-transformers embedder needs that package (and torch): {INSTALL_HINT}",
            package="sentence-transformers",
        ) from exc
    return SentenceTransformer(name, device=device)


class SentenceTransformerEmbedder:
    """Embeds with ``SentenceTransformer(model).encode(...)``, normalised to unit length.

    ``factory(model, device)`` builds the model object (tests pass a stub); it runs
    once, on first use, under a lock. ``revision`` goes into the identity: name a
    model's version there when the name alone does not pin it.
    """

    def __init__(
        self,
        model: str,
        *,
        device: str | None = None,
        batch_size: int = 32,
        revision: str | None = None,
        factory: Callable[[str, str | None], Any] | None = None,
    ) -> None:
        if not model:
            raise ConfigurationError("the sentence-transformers embedder needs a model name")
        self.model = model
        self.device = device
        self.batch_size = batch_size
        self.revision = revision
        self._factory = factory or _default_factory
        self._loaded: Any = None
        self._lock = threading.Lock()

    def _model(self) -> Any:
        if self._loaded is None:
            with self._lock:
                if self._loaded is None:
                    self._loaded = self._factory(self.model, self.device)
        return self._loaded

    @property
    def dim(self) -> int:
        size = self._model().get_sentence_embedding_dimension()
        if not isinstance(size, int) or size < 1:
            raise ConfigurationError(f"model {self.model!r} does not report its embedding size")
        return size

    @property
    def identity(self) -> str:
        name = self.model.rstrip("/").lower()
        revision = f"@{self.revision}" if self.revision else ""
        return f"st:{name}{revision}:{self.dim}"

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        if not texts:
            return []
        raw = self._model().encode(
            list(texts),
            batch_size=self.batch_size,
            convert_to_numpy=True,
            normalize_embeddings=True,
            show_progress_bar=False,
        )
        vectors = np.asarray(raw, dtype=np.float32)
        if vectors.ndim != 2 or vectors.shape[0] != len(texts):
            raise ConfigurationError(
                f"model {self.model!r} returned an array of shape {vectors.shape} for {len(texts)} texts"
            )
        out: list[list[float]] = vectors.tolist()
        return out

    async def aembed(self, texts: Sequence[str]) -> list[list[float]]:
        import anyio.to_thread

        return await anyio.to_thread.run_sync(self.embed, list(texts))

    def __repr__(self) -> str:
        return f"SentenceTransformerEmbedder(model={self.model!r})"
