"""Embedders: text to unit vectors, behind one small port."""

from memstrata.embeddings.port import Embedder

__all__ = ["Embedder"]
