"""Recall never returns another tenant's, user's or agent's messages (canary strings)."""

from __future__ import annotations

import itertools

from hypothesis import given, settings
from hypothesis import strategies as st

from memstrata import Memory, Scope
from memstrata.testing import FakeEmbedder

_run = itertools.count()
NAMES = st.sampled_from(["a", "b"])


@settings(max_examples=15)
@given(
    owners=st.lists(
        st.tuples(NAMES, NAMES, st.sampled_from([None, "x", "y"])),
        min_size=2,
        max_size=5,
        unique=True,
    ),
    query_words=st.lists(
        st.sampled_from(["secret", "canary", "plan", "zebra"]), min_size=1, max_size=3
    ),
)
def test_search_sees_only_its_scope(module_memory: Memory, owners, query_words) -> None:  # type: ignore[no-untyped-def]
    mem = module_memory
    mem.core.recall.use(FakeEmbedder(32))
    run = next(_run)
    scopes = [Scope(f"t{t}{run}", f"u{u}", agent) for t, u, agent in owners]
    canary = {}
    for n, scope in enumerate(scopes):
        conv = mem.conversations.create(scope)
        word = f"canary{run}x{n}"
        canary[scope] = word
        for text in (
            f"the secret plan is {word}",
            f"zebra {word} canary",
            "shared words: secret plan",
        ):
            mem.messages.append(scope, conv.id, role="user", content=text)
    query = " ".join(query_words + [w for w in canary.values()])
    for scope in scopes:
        # A scope without an agent sees all of its user's agents; with one, only that agent.
        visible = {
            other
            for other in scopes
            if (other.tenant, other.user) == (scope.tenant, scope.user)
            and (scope.agent is None or other.agent == scope.agent)
        }
        hits = mem.recall.search(scope, query, k=50)
        texts = " ".join(h.message.content for h in hits)
        for other, word in canary.items():
            if other in visible:
                continue
            assert word not in texts, (scope, other)
        assert canary[scope] in texts
