"""The recall tier's relevance gate: only what clears the floor, never what the context
already holds (window, regeneration siblings, facts drawn from a message)."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import pytest

from memstrata import Memory, Scope
from memstrata.context import Context
from memstrata.context.tiers import TierPolicy, default_policies
from memstrata.recall.gate import RelevanceGate
from memstrata.recall.tier import BELOW_FLOOR
from memstrata.storage.plan import Exec, write
from memstrata.testing import FakeEmbedder
from memstrata.testing.conformance import fresh_scope

LONG_AGO = datetime(2024, 2, 1, 10, 0, tzinfo=UTC)
PAST = [
    "I tried a new Thai food place, the green curry was great",
    "Hiking in the Alps last summer was the best trip of my life",
    "My dog Biscuit is a beagle who loves long walks by the river",
    "Work has been busy with the quarterly report",
]


@pytest.fixture
def mem(memory: Memory) -> Memory:
    memory.core.recall.use(FakeEmbedder(64))
    memory.core.context.auto_compact = False
    return memory


def _past(mem: Memory, scope: Scope, texts: list[str]) -> dict[str, str]:
    conv = mem.conversations.create(scope, title="earlier")
    out = {}
    for i, text in enumerate(texts):
        m = mem.messages.append(
            scope, conv.id, role="user", content=text, occurred_at=LONG_AGO + timedelta(hours=i)
        )
        mem.messages.append(
            scope, conv.id, role="assistant", content="Noted.", occurred_at=LONG_AGO
        )
        out[text] = m.id
    mem.recall.flush(scope)  # what the debounced embedding job does after the appends
    return out


def _ask(mem: Memory, scope: Scope, question: str, budget: int = 4000) -> tuple[str, Context]:
    conv = mem.conversations.create(scope, title="now")
    mem.messages.append(scope, conv.id, role="user", content=question)
    ctx = mem.context(scope, conv.id, budget=budget)
    return conv.id, ctx


def _recalled(ctx: Context) -> str:
    for m in ctx.messages:
        if m["role"] == "system" and m["content"].startswith("<recalled-messages>"):
            return str(m["content"])
    return ""


def test_remind_me_about_my_dog_brings_only_the_dog(real: Memory) -> None:
    mem = real
    scope = fresh_scope()
    _past(mem, scope, PAST)
    _, ctx = _ask(mem, scope, "Remind me about my dog")
    block = _recalled(ctx)
    assert "Biscuit" in block
    assert "Thai food" not in block
    assert "Alps" not in block
    assert "quarterly" not in block
    assert ctx.report.tiers["recall"].items == 1


def test_nothing_relevant_leaves_the_tier_empty_and_says_why(real: Memory) -> None:
    mem = real
    scope = fresh_scope()
    _past(mem, scope, PAST)
    _, ctx = _ask(mem, scope, "Explain lattice quantum chromodynamics")
    recall = ctx.report.tiers["recall"]
    assert _recalled(ctx) == ""
    assert recall.items == 0
    assert recall.asked == 0
    assert recall.granted == 0
    assert recall.reason == BELOW_FLOOR
    assert ctx.report.to_dict()["tiers"]["recall"]["reason"] == BELOW_FLOOR
    dropped = [d for d in ctx.report.dropped if d["tier"] == "recall"]
    assert dropped
    assert {d["reason"] for d in dropped} == {BELOW_FLOOR}
    # A tier that found what it needed gives no reason.
    _, ok = _ask(mem, scope, "Remind me about my dog")
    assert ok.report.tiers["recall"].reason is None
    assert "reason" not in ok.report.to_dict()["tiers"]["recall"]


def test_the_window_is_never_repeated(mem: Memory) -> None:
    scope = fresh_scope()
    conv = mem.conversations.create(scope)
    for i in range(40):
        mem.messages.append(
            scope, conv.id, role="user", content=f"note {i}: my dog Biscuit ate sock number {i}"
        )
    mem.messages.append(scope, conv.id, role="user", content="What did my dog Biscuit eat?")
    # Room held for recall, so the window cannot take everything.
    mem.core.context.set_policy("recall", TierPolicy(default_policies()["recall"].priority, 200))
    for budget in (300, 600, 4000):
        ctx = mem.context(scope, conv.id, budget=budget)
        window = {m.content for m in ctx.window}
        block = _recalled(ctx)
        for text in window:
            assert text not in block
        text = "\n".join(str(m["content"]) for m in ctx.messages)
        for i in range(40):
            assert text.count(f"note {i}: ") <= 1
        if budget < 4000:
            # Older notes of the same branch, out of the window, are recalled.
            assert "sock number" in block
        else:
            assert block == ""  # everything is in the window


def test_regeneration_siblings_are_collapsed(mem: Memory) -> None:
    scope = fresh_scope()
    old = mem.conversations.create(scope)
    q = mem.messages.append(
        scope, old.id, role="user", content="Suggest a name for my beagle puppy"
    )
    first = mem.messages.append(
        scope, old.id, role="assistant", content="Call your beagle puppy Biscuit.", parent_id=q.id
    )
    second = mem.messages.append(
        scope, old.id, role="assistant", content="Call your beagle puppy Biscuit!", parent_id=q.id
    )
    _, ctx = _ask(mem, scope, "What name for my beagle puppy did you suggest, Biscuit?")
    block = _recalled(ctx)
    assert (first.content in block) != (second.content in block)
    assert q.content in block


def test_messages_carried_by_an_injected_fact_are_left_out(real: Memory) -> None:
    mem = real
    scope = fresh_scope()
    ids = _past(mem, scope, PAST)
    dog = ids[PAST[2]]
    fact = mem.facts.add(scope, "Has a beagle named Biscuit who loves river walks")
    source_conv = next(c.id for c in mem.conversations.list(scope).items if c.title == "earlier")
    mem.core.engine.run(
        write(
            lambda: (
                yield Exec(
                    "INSERT INTO fact_sources (fact_id, conversation_id, message_id) "
                    "VALUES (?, ?, ?)",
                    (fact.id, source_conv, dog),
                )
            )
        )
    )
    _, ctx = _ask(mem, scope, "Remind me about my dog")
    text = "\n".join(str(m["content"]) for m in ctx.messages)
    assert "Has a beagle named Biscuit" in text  # the fact is injected ...
    assert PAST[2] not in text  # ... so the message it came from is not repeated
    dropped = [d for d in ctx.report.dropped if d["tier"] == "recall"]
    assert [d["id"] for d in dropped if d["reason"] == "carried by an injected fact"] == [dog]
    # When the fact does not fit, the message is recalled after all.
    mem.core.context.set_policy("facts", _no_room())
    _, tight = _ask(mem, scope, "Remind me about my dog")
    assert PAST[2] in _recalled(tight)


def _no_room() -> TierPolicy:

    return TierPolicy(default_policies()["facts"].priority, 0, 0)


def test_the_gate_needs_a_strong_best_match_then_admits_companions() -> None:
    gate = RelevanceGate()
    assert gate.admit([], 0.0, None) == []
    # No candidate is close enough: nothing goes in.
    assert gate.admit([1.0, 0.9], 0.3, 0.4) == [False, False]
    # A strong best match: every companion with evidence of its own joins.
    assert gate.admit([1.3, 0.3, 0.1], 0.3, 0.7) == [True, True, False]
    assert gate.evidence(0.0, None) == 0.0
    assert gate.evidence(0.5, None) == pytest.approx(1.0)


def test_a_weak_best_match_brings_only_a_few_messages() -> None:
    gate = RelevanceGate()
    # Between the floor and full strength: at most weak_k messages, best first.
    strength = (gate.floor + gate.full) / 2
    admitted = gate.admit([1.0] * 20, 0.0, strength)
    assert admitted == [True] * gate.weak_k + [False] * (20 - gate.weak_k)
    assert gate.limit(0.0, gate.full) is None
    assert gate.limit(0.0, gate.floor - 0.01) == 0
    # The keyword coverage adds to the strength ...
    assert gate.limit(0.5, gate.full - 0.05) is None
    # ... and a message matching most of the query is strong on its own, also without
    # an embedder (keyword recall only).
    assert gate.limit(gate.keyword_floor, None) is None
    assert gate.limit(gate.keyword_floor - 0.01, None) == 0
