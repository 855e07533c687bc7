"""Embedders: text to unit vectors, behind one small port."""

from memstrata.embeddings.port import Embedder
from memstrata.embeddings.registry import EmbedSettings, get_embedder

__all__ = ["EmbedSettings", "Embedder", "get_embedder"]
