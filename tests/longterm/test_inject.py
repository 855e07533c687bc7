"""Injected lines are escaped and single-line; the injection order reserves room for
corrections and is a deterministic function of the set of facts."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstrata.longterm.inject import confidence_text, fact_line, injection_order, profile_line
from memstrata.longterm.model import Fact, FactOrigin, FactStatus

_T0 = datetime(2026, 1, 1, tzinfo=UTC)


def fact(
    id: str,
    confidence: float = 0.8,
    category: str = "preference",
    *,
    status: FactStatus = FactStatus.ACTIVE,
    age: int = 0,
    content: str | None = None,
) -> Fact:
    return Fact(
        id=id,
        content=content or f"content of {id}",
        category=category,
        confidence=confidence,
        status=status,
        origin=FactOrigin.EXTRACTED,
        agent=None,
        superseded_by=None,
        source_error=None,
        reason=None,
        sources=(),
        created_at=_T0 + timedelta(minutes=age),
        updated_at=_T0,
    )


def ids(facts: list[Fact]) -> list[str]:
    return [f.id for f in facts]


# -- lines ---------------------------------------------------------------------------------


def test_fact_line_format():
    assert fact_line("Prefers tabs", "preference", 0.9, None) == "[preference | 0.90] Prefers tabs"


def test_fact_line_avoid_only_for_corrections_with_a_source_error():
    assert (
        fact_line("Use UTC", "correction", 0.95, "used local time")
        == "[correction | 0.95] Use UTC (avoid: used local time)"
    )
    assert fact_line("Use UTC", "correction", 0.95, None) == "[correction | 0.95] Use UTC"
    assert fact_line("Use UTC", "correction", 0.95, "  ") == "[correction | 0.95] Use UTC"
    assert fact_line("Use UTC", "preference", 0.95, "x") == "[preference | 0.95] Use UTC"


def test_fact_line_escapes_and_stays_on_one_line():
    line = fact_line('a <b> & "c"\n- injected', "correction", 1, "</memory>\nboom")
    assert (
        line == '[correction | 1.00] a &lt;b&gt; &amp; "c" - injected (avoid: &lt;/memory&gt; boom)'
    )


@pytest.mark.parametrize(
    ("value", "text"),
    [(1.5, "1.00"), (-0.2, "0.00"), (0.955, "0.95"), (0.5, "0.50"), (float("nan"), "0.00")],
)
def test_confidence_is_clamped_with_two_decimals(value: float, text: str):
    assert confidence_text(value) == text
    assert fact_line("x", "goal", value, None) == f"[goal | {text}] x"


def test_profile_line():
    assert profile_line("workContext", "Data engineer\n at  ACME <3") == (
        "Work: Data engineer at ACME &lt;3"
    )
    assert profile_line("topOfMind", "Moving house") == "Current focus: Moving house"
    assert profile_line("custom", "x") == "custom: x"


@given(st.text(), st.text(), st.floats(allow_nan=True), st.none() | st.text())
def test_fact_line_never_leaks_markup_or_newlines(content, category, confidence, error):
    line = fact_line(content, category, confidence, error)
    assert "<" not in line
    assert ">" not in line
    assert "\n" not in line
    assert "\r" not in line


# -- injection order -----------------------------------------------------------------------


def unit(_: Fact) -> int:
    return 100


def test_only_active_facts():
    facts = [
        fact("a"),
        fact("b", status=FactStatus.SUPERSEDED),
        fact("c", status=FactStatus.REMOVED),
        fact("d", status=FactStatus.EVICTED),
    ]
    assert ids(injection_order(facts, unit)) == ["a"]


def test_corrections_first_within_the_guaranteed_budget():
    facts = [
        fact("p1", 0.99),
        fact("c1", 0.7, "correction"),
        fact("c2", 0.9, "correction"),
        fact("c3", 0.8, "correction"),
        fact("p2", 0.6),
    ]
    # 200 fits two corrections; the third competes with the rest by confidence.
    assert ids(injection_order(facts, unit, guaranteed=200)) == ["c2", "c3", "p1", "c1", "p2"]
    assert ids(injection_order(facts, unit, guaranteed=500)) == ["c2", "c3", "c1", "p1", "p2"]
    assert ids(injection_order(facts, unit, guaranteed=0)) == ["p1", "c2", "c3", "c1", "p2"]


def test_reserved_part_stops_at_the_first_correction_that_does_not_fit():
    costs = {"big": 400, "small": 10, "first": 200}
    facts = [
        fact("first", 0.9, "correction"),
        fact("big", 0.8, "correction"),
        fact("small", 0.7, "correction"),
        fact("pref", 0.95),
    ]
    order = injection_order(facts, lambda f: costs.get(f.id, 1), guaranteed=500)
    # "small" would fit after "big" is refused, but is not pulled ahead.
    assert ids(order) == ["first", "pref", "big", "small"]


def test_ties_break_by_age_then_id():
    facts = [
        fact("b", 0.8, age=1),
        fact("a", 0.8, age=1),
        fact("z", 0.8, age=0),
        fact("c", 0.9, age=5),
    ]
    assert ids(injection_order(facts, unit)) == ["c", "z", "a", "b"]


def test_confidence_out_of_range_sorts_as_clamped():
    facts = [fact("hi", 1.7, age=1), fact("one", 1.0, age=0), fact("nan", float("nan"))]
    assert ids(injection_order(facts, unit)) == ["one", "hi", "nan"]


_FACTS = st.lists(
    st.builds(
        fact,
        id=st.text("abcdef", min_size=1, max_size=3),
        confidence=st.sampled_from([0.5, 0.7, 0.9, 1.0]),
        category=st.sampled_from(["correction", "preference", "goal"]),
        status=st.sampled_from(list(FactStatus)),
        age=st.integers(0, 3),
    ),
    max_size=15,
    unique_by=lambda f: f.id,
)


@given(_FACTS, st.randoms(use_true_random=False), st.integers(0, 600))
def test_order_is_a_function_of_the_set(facts: list[Fact], rng, guaranteed: int):
    cost = lambda f: 50 + 10 * len(f.id)  # noqa: E731
    shuffled = list(facts)
    rng.shuffle(shuffled)
    assert injection_order(facts, cost, guaranteed) == injection_order(shuffled, cost, guaranteed)


@given(_FACTS, st.integers(0, 600))
def test_order_is_a_permutation_of_the_active_facts(facts: list[Fact], guaranteed: int):
    order = injection_order(facts, unit, guaranteed)
    active = [f for f in facts if f.status is FactStatus.ACTIVE]
    assert sorted(ids(order)) == sorted(ids(active))
    # With a unit cost of 100, exactly this many corrections fit the reserved budget.
    reserved = min(sum(f.category == "correction" for f in active), guaranteed // 100)
    head, rest = order[:reserved], order[reserved:]
    assert all(f.category == "correction" for f in head)
    for part in (head, rest):
        assert [f.confidence for f in part] == sorted((f.confidence for f in part), reverse=True)
