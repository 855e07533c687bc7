"""Choosing the embedder from settings (``MEMSTRATA_EMBEDDER`` and ``MEMSTRATA_EMBED_*``).

``MEMSTRATA_EMBEDDER``:

- ``default``: all-MiniLM-L6-v2 on CPU, weights from an installed package (offline);
  ``MEMSTRATA_EMBED_MODEL_DIR`` points it at another copy of the same files,
  ``MEMSTRATA_EMBED_BACKEND`` (``auto|onnxruntime|numpy``) and
  ``MEMSTRATA_EMBED_THREADS`` tune the runner.
- ``openai``: an OpenAI-compatible server: ``MEMSTRATA_EMBED_BASE_URL``,
  ``MEMSTRATA_EMBED_API_KEY``, ``MEMSTRATA_EMBED_MODEL`` (``MEMSTRATA_EMBED_DIM`` saves
  a probe request; ``_BATCH_SIZE``, ``_TIMEOUT``, ``_MAX_RETRIES``).
- ``sentence-transformers``: ``MEMSTRATA_EMBED_MODEL`` run by that package (extra).
- ``none``: no embedder; recall falls back to keyword search only.

Building an embedder never loads a model or opens a connection: that happens on the
first ``embed``.
"""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field, SecretStr
from pydantic_settings import BaseSettings, SettingsConfigDict

from memstrata.embeddings.port import Embedder

__all__ = ["EmbedSettings", "EmbedderKind", "get_embedder"]

EmbedderKind = Literal["default", "openai", "sentence-transformers", "none"]


class EmbedSettings(BaseSettings):
    """The embedder's part of the ``MEMSTRATA_*`` settings (read when constructed)."""

    model_config = SettingsConfigDict(env_prefix="MEMSTRATA_", extra="ignore")

    embedder: EmbedderKind = "default"
    embed_model: str | None = Field(
        default=None, description="Model name (openai, sentence-transformers)."
    )
    embed_base_url: str | None = None
    embed_api_key: SecretStr | None = None
    embed_dim: int | None = Field(default=None, ge=1)
    embed_batch_size: int | None = Field(default=None, ge=1, le=2048)
    embed_timeout: float = Field(default=30.0, gt=0)
    embed_max_retries: int = Field(default=3, ge=0)
    embed_backend: Literal["auto", "onnxruntime", "numpy"] = "auto"
    embed_threads: int | None = Field(default=None, ge=1, le=64)
    embed_model_dir: Path | None = None
    embed_device: str | None = None


def get_embedder(settings: EmbedSettings | None = None) -> Embedder | None:
    """The configured embedder, or None for ``MEMSTRATA_EMBEDDER=none``."""
    s = settings if settings is not None else EmbedSettings()
    if s.embedder == "none":
        return None
    if s.embedder == "openai":
        from memstrata.embeddings.openai import OpenAIEmbedder

        return OpenAIEmbedder(
            s.embed_model or "text-embedding-3-small",
            base_url=s.embed_base_url,
            api_key=s.embed_api_key.get_secret_value() if s.embed_api_key else None,
            dim=s.embed_dim,
            batch_size=s.embed_batch_size or 128,
            max_retries=s.embed_max_retries,
            timeout=s.embed_timeout,
        )
    if s.embedder == "sentence-transformers":
        from memstrata.embeddings.sentence_transformers import SentenceTransformerEmbedder

        return SentenceTransformerEmbedder(
            s.embed_model or "sentence-transformers/all-MiniLM-L6-v2",
            device=s.embed_device,
            batch_size=s.embed_batch_size or 32,
        )
    from memstrata.embeddings.minilm import MiniLMEmbedder

    return MiniLMEmbedder(
        model_dir=s.embed_model_dir,
        backend=s.embed_backend,
        threads=s.embed_threads,
        batch_size=s.embed_batch_size or 8,
    )
