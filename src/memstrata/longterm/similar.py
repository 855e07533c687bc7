"""Near-duplicate matching of fact embeddings (cosine similarity, numpy).

An extraction checks its new facts against the active ones in three steps: :func:`check`
says what to embed, the caller embeds it (the only I/O), and
:meth:`NearDuplicateCheck.matches` names the active fact each new one repeats.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memstrata.longterm.model import Fact, ProposedFact

__all__ = ["NearDuplicateCheck", "best_matches", "check", "cosines"]


def cosines(a: Sequence[Sequence[float]], b: Sequence[Sequence[float]]) -> Any:
    """The cosine similarity of every row of ``a`` with every row of ``b`` (a numpy
    matrix; a zero vector is similar to nothing)."""
    import numpy as np  # only when an embedder is in use

    def unit(rows: Sequence[Sequence[float]]) -> Any:
        m = np.asarray(rows, dtype=np.float32)
        return m / np.maximum(np.linalg.norm(m, axis=1, keepdims=True), 1e-12)

    return unit(a) @ unit(b).T


def best_matches(
    new: Sequence[Sequence[float]], old: Sequence[Sequence[float]], threshold: float
) -> list[int | None]:
    """For each vector of ``new``, the index of the most similar vector of ``old`` when
    their cosine similarity reaches ``threshold``, else None."""
    if not new:
        return []
    if not old:
        return [None] * len(new)
    sims = cosines(new, old)
    best = sims.argmax(axis=1)
    return [int(j) if float(sims[i, j]) >= threshold else None for i, j in enumerate(best.tolist())]


@dataclass(frozen=True, slots=True)
class NearDuplicateCheck:
    """New facts (by their index in the update) to compare with the active facts."""

    wanted: tuple[tuple[int, ProposedFact], ...]
    active: tuple[Fact, ...]
    aliases: Mapping[str, str]

    @property
    def texts(self) -> list[str]:
        """What to embed, in order: the new facts' contents, then the active ones'."""
        return [f.content for _, f in self.wanted] + [f.content for f in self.active]

    def matches(self, vectors: Sequence[Sequence[float]], similarity: float) -> dict[int, str]:
        """New fact index -> the id of the active fact it repeats, from the vectors of
        :attr:`texts`."""
        n = len(self.wanted)
        found = best_matches(vectors[:n], vectors[n:], similarity)
        near: dict[int, str] = {}
        for (i, fact), match in zip(self.wanted, found, strict=True):
            replaced = {self.aliases.get(a) for a in fact.supersedes}
            # A fact that replaces another is naturally close to it: that is no duplicate.
            if match is not None and self.active[match].id not in replaced:
                near[i] = self.active[match].id
        return near


def check(
    new_facts: Sequence[ProposedFact],
    active: Sequence[Fact],
    aliases: Mapping[str, str],
    *,
    threshold: float,
) -> NearDuplicateCheck | None:
    """The check of the new facts confident enough to be stored, or None when there is
    nothing to compare."""
    wanted = tuple((i, f) for i, f in enumerate(new_facts) if f.confidence >= threshold)
    if not wanted or not active:
        return None
    return NearDuplicateCheck(wanted, tuple(active), aliases)
