"""Relevance: a calibrated probability per candidate, the gate's paths (strong query,
standout, first person), and the natural questions a user asks of their own notes."""

from __future__ import annotations

import math

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstrata import Memory, Scope
from memstrata.context import Context
from memstrata.recall.gate import (
    ADMITTED,
    BELOW_FLOOR,
    PERSONAL,
    STANDS_OUT,
    RelevanceGate,
)
from memstrata.recall.relevance import (
    BACKGROUND_PRIOR,
    RelevanceModel,
    Signals,
    background,
    reported,
)
from memstrata.recall.text import analyse_query
from memstrata.testing.conformance import fresh_scope

NOTES = [
    "My dog Juniper is a border collie who herds the neighbours' ducks.",
    "I was raised on a farm outside Cork.",
    "My husband Theo teaches chemistry at a secondary school.",
    "I tore a ligament in my right knee playing football last year.",
    "I drive an old green Volvo estate.",
    "I'm putting money aside for a sailing holiday in Croatia.",
    "My manager is Priya and she likes written status updates.",
    "I play the cello in an amateur orchestra on Thursdays.",
]
ACK = "Got it, I'll remember that."


def _notes(mem: Memory, scope: Scope) -> dict[str, str]:
    ids = {}
    for half in (NOTES[:4], NOTES[4:]):
        conv = mem.conversations.create(scope, title="notes")
        for text in half:
            ids[text] = mem.messages.append(scope, conv.id, role="user", content=text).id
            mem.messages.append(scope, conv.id, role="assistant", content=ACK)
    return ids


def _ask(mem: Memory, scope: Scope, question: str) -> Context:
    conv = mem.conversations.create(scope, title="now")
    mem.messages.append(scope, conv.id, role="user", content=question)
    return mem.context(scope, conv.id, budget=4000)


def _recalled(ctx: Context) -> str:
    return "\n".join(
        str(m["content"])
        for m in ctx.messages
        if m["role"] == "system" and str(m["content"]).startswith("<recalled-messages>")
    )


# -- the model (pure) ------------------------------------------------------------------------


@given(
    st.floats(0, 1),
    st.one_of(st.none(), st.floats(-1, 1)),
    st.floats(-1, 1),
)
def test_relevance_is_a_probability(coverage: float, cosine: float | None, bg: float) -> None:
    r = RelevanceModel()(Signals(coverage, cosine, bg))
    assert 0.0 <= r <= 1.0
    assert not math.isnan(r)


def test_relevance_grows_with_each_signal() -> None:
    model = RelevanceModel()
    base = Signals(0.2, 0.3, 0.1)
    assert model(Signals(0.6, 0.3, 0.1)) > model(base)  # more keywords
    assert model(Signals(0.2, 0.5, 0.1)) > model(base)  # closer
    assert model(Signals(0.2, 0.3, -0.1)) > model(base)  # stands further above the rest
    assert model(Signals(0.8, None)) > model(Signals(0.1, None))  # keywords alone


def test_background_is_the_mean_of_the_runners_up_or_a_prior() -> None:
    assert background([0.9, 0.2, 0.1, 0.3]) == BACKGROUND_PRIOR  # too few to measure
    sims = [0.9] + [0.1] * 19 + [0.5] + [0.0] * 10
    # The 2nd..21st highest: 0.5 and nineteen 0.1s; the best is not its own background.
    assert background(sims) == pytest.approx((0.5 + 19 * 0.1) / 20)


# -- the gate's paths (pure) -----------------------------------------------------------------


def test_a_candidate_far_above_the_background_stands_out_of_a_weak_query() -> None:
    gate = RelevanceGate()
    # A weak query (best cosine 0.45): below the floor, but the first candidate stands
    # 0.38 above what the store offers the query anyway.
    verdicts = gate.verdicts([0.8, 0.1], 0.0, 0.45, [(0.45, 0.38), (0.12, 0.05)])
    assert verdicts == [STANDS_OUT, BELOW_FLOOR]
    # The same cosine in a store where everything is close to the query: nothing.
    assert gate.verdicts([0.8, 0.7], 0.0, 0.45, [(0.45, 0.05), (0.43, 0.03)]) == [
        BELOW_FLOOR,
        BELOW_FLOOR,
    ]


def test_standing_out_needs_both_the_margin_and_the_cosine() -> None:
    gate = RelevanceGate()
    # An impersonal question about the user's work ("What day does the pager get handed
    # over?"): the right note is the nearest, 0.21 above the background.
    assert gate.verdicts([0.4], 0.0, 0.35, [(0.35, 0.21)]) == [STANDS_OUT]
    # Less of a margin (what an unrelated question's nearest note shows), or the margin
    # without the cosine: no.
    assert gate.verdicts([0.4], 0.0, 0.36, [(0.36, 0.16)]) == [BELOW_FLOOR]
    assert gate.verdicts([0.1], 0.0, 0.3, [(0.3, 0.22)]) == [BELOW_FLOOR]


def test_a_first_person_query_brings_its_best_few() -> None:
    gate = RelevanceGate()
    standouts = [(0.28, 0.14), (0.26, 0.12), (0.2, 0.06), (0.16, 0.02), (0.1, -0.04)]
    evidence = [0.1] * 5
    impersonal = gate.verdicts(evidence, 0.0, 0.28, standouts)
    assert set(impersonal) == {BELOW_FLOOR}
    personal = gate.verdicts(evidence, 0.0, 0.28, standouts, personal=True)
    assert personal[:3] == [PERSONAL] * 3
    assert personal[3:] == [BELOW_FLOOR] * 2
    # Too far from anything: even a first-person query brings nothing.
    far = [(0.12, 0.05), (0.1, 0.03)]
    assert set(gate.verdicts([0.0, 0.0], 0.0, 0.12, far, personal=True)) == {BELOW_FLOOR}


def test_a_first_person_query_brings_its_nearest_as_well_as_its_first_ranked() -> None:
    """The path is opened by the nearest statement, so that one comes in even where fusion
    ranks messages sharing a word with the question ("Which client brings in the most
    money for us?": "client") above it; the best ranked come in too (the keywords can
    name what the meaning misses)."""
    gate = RelevanceGate()
    standouts = [(0.154, 0.025), (0.05, -0.08), (0.228, 0.1), (0.198, 0.07), (0.34, 0.21)]
    personal = gate.verdicts([0.1] * 5, 0.24, 0.34, standouts, personal=True)
    assert personal == [PERSONAL, BELOW_FLOOR, PERSONAL, PERSONAL, PERSONAL]
    # Ranked and near at once: three lines, not six.
    same = [(0.3, 0.15), (0.25, 0.1), (0.2, 0.05), (0.1, -0.05)]
    assert gate.verdicts([0.1] * 4, 0.0, 0.3, same, personal=True).count(PERSONAL) == 3


def test_a_strong_query_is_unchanged_by_the_new_paths() -> None:
    gate = RelevanceGate()
    verdicts = gate.verdicts([1.3, 0.3], 0.3, 0.7, [(0.7, 0.2), (0.5, 0.0)])
    assert verdicts == [ADMITTED, ADMITTED]
    assert gate.admit([1.3, 0.3], 0.3, 0.7) == [True, True]


@pytest.mark.parametrize(
    ("text", "personal"),
    [
        ("What breed is my dog?", True),
        ("Which database do we run in production?", True),
        ("Who wrote the Odyssey?", False),
        ("Is Sydney the capital of Australia?", False),
        # "US" in capitals is the country; "us" is the user and their people.
        ("Which US state has the most lakes?", False),
        ("Is the US embassy open for us on Monday?", True),
        # A request's "me" asks for help, not about the user...
        ("Give me three ideas for a birthday card.", False),
        ("Can you please tell me how tides work?", False),
        ("Could you recommend me a thriller?", False),
        # ...unless the query speaks of the user too, or asks what was said to them.
        ("Tell me where I parked.", True),
        ("Can you remind me what my locker code is?", True),
        ("What did the dentist tell me last time?", True),
        ("How much would the desk cost me?", True),
    ],
)
def test_first_person_queries_are_recognised(text: str, personal: bool) -> None:
    assert analyse_query(text).personal is personal


# -- natural questions over a user's own notes (the default embedder) ------------------------


@pytest.mark.parametrize(
    ("question", "answer"),
    [
        ("What breed is my dog?", "border collie"),
        ("Where did I spend my childhood?", "Cork"),
        ("Which joint did I injure?", "knee"),
        ("Who is my boss?", "Priya"),
        ("Which instrument do I play?", "cello"),
    ],
)
def test_natural_questions_bring_back_the_statement(
    real: Memory, question: str, answer: str
) -> None:
    scope = fresh_scope()
    _notes(real, scope)
    ctx = _ask(real, scope, question)
    assert answer in _recalled(ctx)
    assert ctx.report.tiers["recall"].pending == 0


@pytest.mark.parametrize(
    "question", ["Who wrote the Odyssey?", "What is the boiling point of water at sea level?"]
)
def test_unrelated_questions_bring_nothing(real: Memory, question: str) -> None:
    scope = fresh_scope()
    _notes(real, scope)
    ctx = _ask(real, scope, question)
    assert _recalled(ctx) == ""
    assert ctx.report.tiers["recall"].granted == 0
    rejected = [d for d in ctx.report.dropped if d["tier"] == "recall"]
    assert rejected  # named with their reason and relevance, never injected
    assert all(0.0 <= d["provenance"]["relevance"] <= 1.0 for d in rejected)


def test_natural_questions_are_answered_right_after_they_were_written(real: Memory) -> None:
    """Read-your-writes: no flush, no job, no wait between the appends and the question."""
    scope = fresh_scope()
    _notes(real, scope)
    assert real.recall.pending(scope) == len(NOTES) * 2
    hits = real.recall.search(scope, "Which joint did I injure?", k=3)
    assert "knee" in hits[0].message.content
    assert hits.pending == 0
    assert real.recall.pending(scope) == 0


def test_a_reported_relevance_stays_below_one() -> None:
    # 0.99996 would round to 1.0 and pass min_relevance=1, which no logistic can reach.
    assert reported(0.99996) == 0.9999
    assert reported(0.123456) == 0.1235
    assert reported(RelevanceModel()(Signals(coverage=1.0, cosine=1.0, background=0.0))) < 1
