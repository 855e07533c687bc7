"""What a search returns: its hits, the ``explain_ids`` verdicts, and the check of its
arguments that both the facade and the remote client run."""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from memstrata.encoding import to_json
from memstrata.errors import InvalidInput
from memstrata.types import Message

__all__ = ["MAX_EXPLAIN_IDS", "Explanation", "RecallHit", "RecallResults", "check_explain"]


@dataclass(frozen=True, slots=True)
class RecallHit:
    """One recalled message. ``provenance`` lists the message ids it stands for;
    ``neighbour_of`` is set on a message returned as context around another hit.

    ``score`` orders the hits (fusion, comparable within one search only); ``relevance``
    is the calibrated probability that the message is relevant to the query, in [0, 1]
    (:mod:`memstrata.recall.relevance`; a neighbour carries its hit's). ``signals`` holds
    the per-signal scores when the search was asked to ``explain``."""

    message: Message
    conversation_id: str
    score: float
    provenance: tuple[str, ...]
    neighbour_of: str | None = None
    relevance: float = 0.0
    signals: dict[str, Any] | None = None

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)


@dataclass(frozen=True, slots=True)
class Explanation:
    """What became of one message id named in ``explain_ids``: ``reason`` is
    :data:`RETURNED` or one of :data:`WHY_NOT`. ``conversation_id`` is None when unknown."""

    id: str
    conversation_id: str | None
    reason: str
    relevance: float | None = None

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)


class RecallResults(list[RecallHit]):
    """What a search returns: its hits (a list, best first) and, beside them, ``pending``
    (the caller's messages not yet searchable by meaning: past the read's embedding
    bound, found by keywords only) and ``explained`` (the ``explain_ids`` verdicts)."""

    pending: int
    explained: list[Explanation]

    def __init__(
        self,
        hits: Iterable[RecallHit] = (),
        *,
        pending: int = 0,
        explained: Iterable[Explanation] = (),
    ) -> None:
        super().__init__(hits)
        self.pending = pending
        self.explained = list(explained)


MAX_EXPLAIN_IDS = 100


def check_explain(min_relevance: float, explain_ids: Iterable[str]) -> tuple[float, list[str]]:
    """``min_relevance`` in [0, 1]; ``explain_ids`` a collection of at most 100 ids."""
    if (
        isinstance(min_relevance, bool)
        or not isinstance(min_relevance, int | float)
        or not 0.0 <= min_relevance <= 1.0
    ):
        raise InvalidInput("min_relevance must be a number in 0..1", field="min_relevance")
    if isinstance(explain_ids, str):
        raise InvalidInput("explain_ids must be a collection of ids", field="explain_ids")
    ids = list(dict.fromkeys(explain_ids))
    if len(ids) > MAX_EXPLAIN_IDS:
        raise InvalidInput(f"at most {MAX_EXPLAIN_IDS} explain_ids", field="explain_ids")
    if not all(isinstance(i, str) and i for i in ids):
        raise InvalidInput("explain_ids must be non-empty strings", field="explain_ids")
    return float(min_relevance), ids
