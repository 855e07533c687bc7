"""The window ranking: a message scored by the query terms held around it (pure)."""

from __future__ import annotations

import pytest

from memstrata.recall.fusion import Candidate, FusionParams, fuse
from memstrata.recall.scoring import DocMatch, Matches, TermWindows, idf


def _doc(seq: int, conv: str = "c1") -> DocMatch:
    return DocMatch(seq, f"m{seq}", conv, 10)


def test_a_message_scores_the_terms_held_around_it_each_once() -> None:
    # "breed" at 10 and 12, "rex" at 11: the window of 12 (10..14) holds both, once each.
    postings = {"breed": [_doc(10), _doc(12)], "rex": [_doc(11)]}
    w = TermWindows(Matches.of(postings))
    both = idf(2) + idf(1)
    assert w.score(12, "c1") == pytest.approx(both)
    # 13 holds no term itself and still has its window's (the answer after the question)
    assert w.score(13, "c1") == pytest.approx(both)
    assert w.score(14, "c1") == pytest.approx(idf(2))  # 12 only: 11 is three away
    assert w.score(15, "c1") == 0.0


def test_another_conversations_messages_never_join_a_window() -> None:
    postings = {"breed": [_doc(10, "other")], "rex": [_doc(11)]}
    w = TermWindows(Matches.of(postings))
    assert w.score(12, "c1") == pytest.approx(idf(1))
    assert w.score(12, "other") == pytest.approx(idf(1))  # only its own "breed"


def test_span_bounds_the_window() -> None:
    postings = {"breed": [_doc(10)]}
    assert TermWindows(Matches.of(postings), span=1).score(12, "c1") == 0.0
    assert TermWindows(Matches.of(postings), span=2).score(12, "c1") > 0.0


def test_ranks_best_first_newer_first_on_ties_and_leave_out_empty_windows() -> None:
    postings = {"breed": [_doc(10)], "rex": [_doc(20), _doc(30)]}
    w = TermWindows(Matches.of(postings))
    ranked = w.ranks([("a", 10, "c1"), ("b", 20, "c1"), ("c", 30, "c1"), ("d", 50, "c1")])
    # "breed" is rarer (held once) than "rex" (twice): its window ranks first
    assert ranked == {"a": 1, "c": 2, "b": 3}


def test_the_score_does_not_depend_on_the_order_of_the_postings() -> None:
    a = {"breed": [_doc(1), _doc(5)], "rex": [_doc(2)], "park": [_doc(3), _doc(9)]}
    b = {k: list(reversed(v)) for k, v in a.items()}
    for seq in range(0, 12):
        assert TermWindows(Matches.of(a)).score(seq, "c1") == TermWindows(Matches.of(b)).score(
            seq, "c1"
        )


def test_fusion_gives_the_window_rank_its_weight() -> None:
    def cands() -> list[Candidate]:
        return [
            Candidate("x", "c1", None, ("c1", 1), keyword_rank=1),
            Candidate("y", "c1", None, ("c1", 2), keyword_rank=2, window_rank=1),
        ]

    off = fuse(cands(), temporal=False, params=FusionParams(window_weight=0.0, segment_share=0.0))
    on = fuse(cands(), temporal=False, params=FusionParams(segment_share=0.0))
    assert [c.id for c in off] == ["x", "y"]
    assert [c.id for c in on] == ["y", "x"]
