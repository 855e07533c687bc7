"""Search explains itself: relevance on every hit, min_relevance, per-signal scores, and
for named message ids whether they were returned and why not."""

from __future__ import annotations

import pytest

from memstrata import Memory, Scope
from memstrata.errors import InvalidInput
from memstrata.recall.search import RETURNED, WHY_NOT
from memstrata.testing import FakeEmbedder
from memstrata.testing.conformance import fresh_scope


@pytest.fixture
def mem(memory: Memory) -> Memory:
    memory.core.recall.use(FakeEmbedder(64))
    return memory


def _why(results, mid: str) -> set[str]:  # type: ignore[no-untyped-def]
    return {e.reason for e in results.explained if e.id == mid}


def test_every_hit_has_a_relevance_and_min_relevance_filters(mem: Memory) -> None:
    scope = fresh_scope()
    conv = mem.conversations.create(scope)
    for text in ("the parrot sings", "a parrot and a cat", "gardening with tomatoes"):
        mem.messages.append(scope, conv.id, role="user", content=text)
    hits = mem.recall.search(scope, "parrot", k=10)
    assert hits
    assert all(0.0 <= h.relevance <= 1.0 for h in hits)
    assert all(h.signals is None for h in hits)
    floor = max(h.relevance for h in hits)
    kept = mem.recall.search(scope, "parrot", k=10, min_relevance=floor)
    assert kept
    assert all(h.relevance >= floor for h in kept)
    assert len(kept) <= len(hits)
    explained = mem.recall.search(scope, "parrot", k=10, explain=True)
    sig = explained[0].signals
    assert sig is not None
    assert {
        "keyword_coverage",
        "cosine",
        "background",
        "relevance",
        "fused_score",
        "window_rank",
    } <= set(sig)
    assert sig["relevance"] == explained[0].relevance


def test_explain_ids_says_why_not(mem: Memory) -> None:
    scope, stranger = fresh_scope(), fresh_scope()
    conv = mem.conversations.create(scope)
    q = mem.messages.append(scope, conv.id, role="user", content="is sydney the capital city")
    wrong = mem.messages.append(
        scope, conv.id, role="assistant", content="the capital city is sydney", parent_id=q.id
    )
    right = mem.messages.append(
        scope, conv.id, role="assistant", content="the capital city is canberra", parent_id=q.id
    )
    other = mem.conversations.create(scope)
    elsewhere = mem.messages.append(scope, other.id, role="user", content="capital city trip")
    theirs = mem.conversations.create(stranger)
    foreign = mem.messages.append(stranger, theirs.id, role="user", content="capital city")
    ids = [right.id, wrong.id, elsewhere.id, foreign.id, "no-such-id"]
    on_branch = mem.recall.search(
        scope, "capital city", k=5, conversation_id=conv.id, leaf_id=right.id, explain_ids=ids
    )
    assert _why(on_branch, right.id) == {RETURNED}
    assert _why(on_branch, wrong.id) == {"other_branch"}
    assert _why(on_branch, elsewhere.id) == {"other_conversation"}
    # Another user's message cannot be told from one that does not exist.
    assert _why(on_branch, foreign.id) == {"unknown"}
    assert _why(on_branch, "no-such-id") == {"unknown"}
    assert all(e.conversation_id is None for e in on_branch.explained if e.reason == "unknown")
    top = mem.recall.search(scope, "capital city", k=1, explain_ids=ids)
    assert len(top) == 1
    # With no leaf each conversation counts by its active branch: the answer regenerated
    # away stays out of every search.
    assert _why(top, wrong.id) == {"other_branch"}
    assert {e.reason for e in top.explained if e.id not in (top[0].message.id, wrong.id)} <= {
        "ranked_below_k",
        "unknown",
    }
    picky = mem.recall.search(scope, "capital city", k=5, min_relevance=1.0, explain_ids=ids)
    assert list(picky) == []
    assert _why(picky, elsewhere.id) == {"below_relevance"}
    excluded = mem.recall.search(scope, "capital city", exclude_ids=[q.id], explain_ids=[q.id])
    assert _why(excluded, q.id) == {"excluded"}
    assert {e.reason for e in on_branch.explained} <= {RETURNED, *WHY_NOT}


def test_a_message_not_yet_embedded_is_named_so(mem: Memory) -> None:
    scope = fresh_scope()
    conv = mem.conversations.create(scope)
    waiting = mem.messages.append(scope, conv.id, role="user", content="zebras graze at dusk")
    mem.core.settings.recall_read_embed_max = 0  # the read embeds nothing
    results = mem.recall.search(scope, "lighthouse keeper", explain_ids=[waiting.id])
    assert results.pending == 1
    assert _why(results, waiting.id) == {"not_embedded"}
    mem.core.settings.recall_read_embed_max = 256
    results = mem.recall.search(scope, "lighthouse keeper", explain_ids=[waiting.id])
    assert results.pending == 0
    assert _why(results, waiting.id) <= {RETURNED, "ranked_below_k", "outside_candidate_pool"}


@pytest.mark.parametrize(
    ("kwargs", "field"),
    [
        ({"min_relevance": 1.5}, "min_relevance"),
        ({"min_relevance": -0.1}, "min_relevance"),
        ({"min_relevance": True}, "min_relevance"),
        ({"explain_ids": "abc"}, "explain_ids"),
        ({"explain_ids": [str(i) for i in range(101)]}, "explain_ids"),
        ({"explain_ids": [""]}, "explain_ids"),
    ],
)
def test_bad_explain_arguments_are_refused(
    mem: Memory, kwargs: dict[str, object], field: str
) -> None:
    with pytest.raises(InvalidInput) as err:
        mem.recall.search(Scope("t", "u"), "x", **kwargs)  # type: ignore[arg-type]
    assert err.value.detail["field"] == field
