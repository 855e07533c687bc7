"""Current truth at injection: of two active facts that contradict, only the newer is
injected as current (the older comes after every current fact, marked ``(outdated)``),
and a recalled message whose facts were superseded is left out, whatever the model did.
The rule itself is pure (``outdated``); the rest runs on every backend."""

from __future__ import annotations

from dataclasses import replace
from datetime import UTC, datetime, timedelta

from longterm_support import rule_extractor
from memstrata import Memory, Scope
from memstrata.domain.context import Context
from memstrata.longterm.currency import OUTDATED, outdated
from memstrata.longterm.model import Fact, FactOrigin, FactStatus
from memstrata.testing import FakeLLM
from memstrata.testing.conformance import fresh_scope
from support import Models

T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _fact(n: int, content: str, category: str = "preference") -> Fact:
    at = T0 + timedelta(days=n)
    return Fact(
        f"f{n}", content, category, 0.9, FactStatus.ACTIVE, FactOrigin.EXTRACTED,
        None, None, None, None, (), at, at, valid_from=at,
    )  # fmt: skip


def test_the_newer_of_two_contradicting_facts_wins() -> None:
    sushi = _fact(1, "User likes sushi, especially salmon nigiri on Fridays")
    over = _fact(2, "User no longer likes sushi")
    assert outdated([over, sushi]) == {"f1": "f2"}
    # The other way round in time: liking it again outdates the "no longer".
    assert outdated([_fact(1, "User doesn't like jazz"), _fact(2, "User loves jazz")]) == {
        "f1": "f2"
    }
    # The health report's contradiction candidates: same category and subject word.
    berlin = _fact(3, "User lives in Berlin", "context")
    paris = _fact(4, "User lives in Paris", "context")
    assert outdated([paris, berlin]) == {"f3": "f4"}
    # Event time decides, not the order given nor the order recorded.
    late = replace(berlin, valid_from=T0 + timedelta(days=9))
    assert outdated([paris, late]) == {"f4": "f3"}
    # Not contradictions: another thing negated, another category, two different verbs.
    assert outdated([sushi, _fact(5, "User no longer likes spicy food")]) == {}
    assert outdated([berlin, _fact(6, "User lives in Paris", "goal")]) == {}
    assert outdated([sushi, _fact(7, "User works at a sushi bar")]) == {}
    # A user likes many things at once: only a negation outdates a "likes".
    assert outdated([_fact(8, "User likes jazz"), _fact(9, "User likes hiking")]) == {}


def _setup(models: Models, mem: Memory) -> None:
    models(mem, facts_llm=FakeLLM(rule_extractor), facts_embedder=None)


def _say(mem: Memory, scope: Scope, text: str) -> None:
    c = mem.conversations.create(scope)
    mem.messages.append(scope, c.id, role="user", content=text)
    mem.messages.append(scope, c.id, role="assistant", content="Noted.")
    mem.longterm.flush(scope, c.id)


def _context(mem: Memory, scope: Scope, query: str) -> list[str]:
    return [m["content"] for m in _ask(mem, scope, query).messages if m["role"] == "system"]


def _ask(mem: Memory, scope: Scope, query: str) -> Context:
    c = mem.conversations.create(scope)
    mem.messages.append(scope, c.id, role="user", content=query)
    return mem.context(scope, c.id, budget=4000, query=query)


def _memory_lines(mem: Memory, scope: Scope, query: str) -> list[str]:
    block = next(s for s in _context(mem, scope, query) if s.startswith("<memory>"))
    return block.splitlines()[1:-1]


def test_a_supersession_the_model_missed_is_not_injected_as_current(
    memory: Memory, models: Models
) -> None:
    _setup(models, memory)
    s = fresh_scope()
    _say(memory, s, "I like sushi, especially salmon nigiri on Fridays.")
    _say(memory, s, "I no longer like sushi.")
    # The model kept both active (it matched only "likes sushi" exactly) ...
    active = {f.content for f in memory.facts.list(s).items}
    assert active == {
        "User likes sushi, especially salmon nigiri on Fridays",
        "User no longer likes sushi",
    }
    # ... the context does not: the newer is current, the older last and marked.
    lines = _memory_lines(memory, s, "Do I like sushi?")
    assert lines == [
        "[preference | 0.90] User no longer likes sushi",
        f"[preference | 0.95] User likes sushi, especially salmon nigiri on Fridays {OUTDATED}",
    ]
    # Facts added by hand are judged the same way.
    memory.facts.add(s, "User lives in Berlin")
    memory.facts.add(s, "User lives in Paris")
    lines = _memory_lines(memory, s, "Where do I live?")
    assert lines == [
        "[context | 1.00] User lives in Paris",
        "[preference | 0.90] User no longer likes sushi",
        f"[context | 1.00] User lives in Berlin {OUTDATED}",
        f"[preference | 0.95] User likes sushi, especially salmon nigiri on Fridays {OUTDATED}",
    ]


def test_a_recalled_message_whose_fact_was_superseded_is_left_out(
    memory: Memory, models: Models
) -> None:
    _setup(models, memory)
    s = fresh_scope()
    _say(memory, s, "I like rooibos tea with honey")
    c = memory.conversations.create(s)
    memory.messages.append(s, c.id, role="user", content="My rooibos tea kettle whistles loudly")
    memory.messages.append(s, c.id, role="assistant", content="Noted.")
    # Without the facts in the context, a message is recalled for what it says.
    memory.longterm.kit.facts_tier.enabled = False
    query = "rooibos tea"
    text = "\n".join(_context(memory, s, query))
    assert "I like rooibos tea with honey" in text  # recalled while it is current
    _say(memory, s, "I no longer like rooibos tea with honey")
    [old] = memory.facts.list(s, status="superseded").items
    assert old.content == "User likes rooibos tea with honey"
    ctx = _ask(memory, s, query)
    text = "\n".join(m["content"] for m in ctx.messages)
    assert "I like rooibos tea with honey" not in text
    said = memory.messages.path(s, old.sources[0].conversation_id)[0]
    assert {"tier": "recall", "id": said.id, "reason": "superseded"}.items() <= next(
        d for d in ctx.report.dropped if d["id"] == said.id
    ).items()
    assert "My rooibos tea kettle whistles loudly" in text  # no fact: still recalled
