"""Near-duplicate matching of fact embeddings (cosine similarity, numpy)."""

from __future__ import annotations

from collections.abc import Sequence

__all__ = ["best_matches"]


def best_matches(
    new: Sequence[Sequence[float]], old: Sequence[Sequence[float]], threshold: float
) -> list[int | None]:
    """For each vector of ``new``, the index of the most similar vector of ``old`` when
    their cosine similarity reaches ``threshold``, else None."""
    if not new:
        return []
    if not old:
        return [None] * len(new)
    import numpy as np  # only when an embedder is in use

    a = np.asarray(new, dtype=np.float32)
    b = np.asarray(old, dtype=np.float32)
    a /= np.maximum(np.linalg.norm(a, axis=1, keepdims=True), 1e-12)
    b /= np.maximum(np.linalg.norm(b, axis=1, keepdims=True), 1e-12)
    sims = a @ b.T
    best = sims.argmax(axis=1)
    return [int(j) if float(sims[i, j]) >= threshold else None for i, j in enumerate(best.tolist())]
