"""The update planner against a naive reference: what stays active after a plan."""

from __future__ import annotations

from hypothesis import given
from hypothesis import strategies as st

from memstrata.longterm.apply import ActiveFact, content_key, plan_update
from memstrata.longterm.model import FactOrigin, ProposedFact, ProposedUpdate, Removal

WORDS = ["tea", "Tea", "coffee", "jazz", "chess", "uploaded file report", "rain", "snow"]


@st.composite
def scenarios(draw: st.DrawFn) -> tuple[list[ActiveFact], ProposedUpdate, int]:
    n = draw(st.integers(0, 12))
    active: list[ActiveFact] = []
    keys: set[str] = set()
    for i in range(n):
        text = f"{draw(st.sampled_from(WORDS))} {draw(st.integers(0, 5))}"
        if content_key(text) in keys:
            continue
        keys.add(content_key(text))
        origin = draw(st.sampled_from(list(FactOrigin)))
        conf = draw(st.floats(0, 1))
        active.append(ActiveFact(f"id{i}", f"f{i + 1}", content_key(text), conf, origin, i))
    aliases = [a.alias for a in active] + ["f99"]
    new = draw(
        st.lists(
            st.builds(
                ProposedFact,
                content=st.builds(
                    lambda w, k: f"{w} {k}", st.sampled_from(WORDS), st.integers(0, 5)
                ),
                category=st.just("preference"),
                confidence=st.floats(0, 1),
                supersedes=st.lists(st.sampled_from(aliases), max_size=2).map(tuple),
            ),
            max_size=8,
        )
    )
    removals = draw(
        st.lists(
            st.builds(Removal, alias=st.sampled_from(aliases), reason=st.just("r")), max_size=3
        )
    )
    cap = draw(st.integers(1, 12))
    return active, ProposedUpdate(new_facts=tuple(new), removals=tuple(removals)), cap


def _mentions(text: str) -> bool:
    return "uploaded" in text


@given(scenarios())
def test_the_plan_keeps_its_invariants(case: tuple[list[ActiveFact], ProposedUpdate, int]) -> None:
    active, update, cap = case
    plan = plan_update(
        active, update, scrub=str, mentions_upload=_mentions, threshold=0.7, max_facts=cap
    )
    by_id = {a.id: a for a in active}
    gone = {old for old, _, _ in plan.superseded} | {old for old, _ in plan.removed}
    gone |= set(plan.evicted)
    # Every change names a fact that was active, and each at most once.
    changes = [old for old, _, _ in plan.superseded] + [o for o, _ in plan.removed] + plan.evicted
    assert len(changes) == len(set(changes))
    assert set(changes) <= set(by_id)
    # Manual facts are never removed or evicted by extraction.
    assert not any(by_id[i].origin is FactOrigin.MANUAL for i in plan.evicted)
    assert not any(by_id[i].origin is FactOrigin.MANUAL for i, _ in plan.removed)
    # New facts: confident, no upload mention, no duplicate of each other or of what stays.
    staying = [a for a in active if a.id not in gone]
    keys = [a.content_key for a in staying] + [n.key for n in plan.new]
    assert len(keys) == len(set(keys))
    assert all(n.confidence >= 0.7 and not _mentions(n.content) for n in plan.new)
    # The cap holds whenever there are enough non-manual facts to evict.
    manual = sum(1 for a in staying if a.origin is FactOrigin.MANUAL)
    assert len(staying) + len(plan.new) <= max(cap, manual)
    # A supersession points at a new fact of this plan or at an active duplicate.
    new_index = {n.index for n in plan.new}
    for _, target, _ in plan.superseded:
        assert target in new_index if isinstance(target, int) else target in by_id


def test_a_weak_fact_never_supersedes() -> None:
    active = [ActiveFact("a", "f1", "likes tea", 0.9, FactOrigin.EXTRACTED, 1)]
    update = ProposedUpdate(
        new_facts=(ProposedFact("likes coffee", "preference", 0.5, supersedes=("f1",)),)
    )
    plan = plan_update(active, update, scrub=str)
    assert plan.empty
    assert plan.notes
