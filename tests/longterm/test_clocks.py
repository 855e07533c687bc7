"""The two clocks of long-term memory on every backend: event time (valid_from, valid_to)
and system time (recorded_at, superseded_at); reads default to "true now"; ``as_of`` and
``known_at`` answer bitemporal questions; imports keep the data's own event time;
extraction prompts carry each message's time."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from longterm_support import rule_extractor
from memstrata import Memory, Scope
from memstrata.errors import InvalidInput
from memstrata.longterm.clocks import parse_instant, parse_loose_date
from memstrata.storage.records import to_micros
from memstrata.testing import FakeLLM
from memstrata.testing.conformance import fresh_scope
from memstrata.transfer.tables import with_clocks
from support import Models

T0 = datetime(2026, 1, 5, 9, 30, tzinfo=UTC)
T1 = datetime(2026, 2, 1, tzinfo=UTC)
T2 = datetime(2026, 3, 1, 12, 0, tzinfo=UTC)
T3 = datetime(2026, 4, 1, tzinfo=UTC)


def _at(mem: Memory, when: datetime) -> None:
    """Run the memory's clock at ``when`` (what it records as now)."""
    micros = to_micros(when)
    mem.core.rt.clock = lambda: micros


def _setup(models: Models, mem: Memory, llm: FakeLLM) -> None:
    models(mem, facts_llm=llm, facts_embedder=None)


def _say(mem: Memory, scope: Scope, cid: str, user: str, **kw: Any) -> None:
    mem.messages.append(scope, cid, role="user", content=user, **kw)
    mem.messages.append(scope, cid, role="assistant", content="Noted.", **kw)


def _contents(facts: Any) -> list[str]:
    return sorted(f.content for f in facts)


def test_a_fact_superseded_at_t2_is_returned_as_of_t1_not_by_default(
    memory: Memory, models: Models
) -> None:
    _setup(models, memory, FakeLLM(rule_extractor))
    s = fresh_scope()
    _at(memory, T0)
    c = memory.conversations.create(s)
    _say(memory, s, c.id, "I like green tea.")
    memory.longterm.flush(s, c.id)
    [old] = memory.facts.list(s).items
    assert (old.valid_from, old.valid_to, old.recorded_at, old.superseded_at) == (
        T0,
        None,
        T0,
        None,
    )

    _at(memory, T2)
    _say(memory, s, c.id, "I no longer like green tea.")
    memory.longterm.flush(s, c.id)

    # Default: true now (the replacement only).
    assert _contents(memory.facts.list(s).items) == ["User no longer likes green tea"]
    # As of T1: the old fact, as known then.
    [then] = memory.facts.list(s, as_of=T1).items
    assert then.id == old.id
    assert then.status.value == "superseded"
    assert _contents(memory.facts.list(s, as_of="2026-02-01T00:00:00Z").items) == [
        "User likes green tea"
    ]
    assert _contents(memory.facts.list(s, as_of=T3).items) == ["User no longer likes green tea"]
    # As known now (or at T2, once replaced), the old fact held at T1 and ended at T2.
    assert [f.id for f in memory.facts.list(s, as_of=T1, known_at=T3).items] == [old.id]
    assert [f.id for f in memory.facts.list(s, as_of=T1, known_at=T2).items] == [old.id]
    # At T2 itself the replacement holds, as known then and now.
    assert _contents(memory.facts.list(s, as_of=T2).items) == ["User no longer likes green tea"]
    assert _contents(memory.facts.list(s, as_of=T2, known_at=T3).items) == [
        "User no longer likes green tea"
    ]
    # Both clocks closed on the old fact at T2; the new one holds from T2.
    by_id = {f.id: f for f in memory.facts.list(s, status="all").items}
    closed = by_id[old.id]
    assert (closed.valid_to, closed.superseded_at) == (T2, T2)
    [new] = [f for f in by_id.values() if f.id != old.id]
    assert (new.valid_from, new.recorded_at, new.valid_to, new.superseded_at) == (
        T2,
        T2,
        None,
        None,
    )

    # Context: the memory block holds what was true then.
    c2 = memory.conversations.create(s)
    memory.messages.append(s, c2.id, role="user", content="What should I drink?")
    now_blocks = [m["content"] for m in memory.context(s, c2.id).messages if m["role"] == "system"]
    then_blocks = [
        m["content"] for m in memory.context(s, c2.id, as_of=T1).messages if m["role"] == "system"
    ]
    assert any("User no longer likes green tea" in b for b in now_blocks)
    assert not any("User likes green tea" in b for b in now_blocks)
    assert any("User likes green tea" in b for b in then_blocks)
    assert not any("no longer" in b for b in then_blocks)

    # Recall as of T1: only messages created by then.
    hits = [h.message for h in memory.recall.search(s, "green tea", k=10, as_of=T1)]
    assert "I like green tea." in [m.content for m in hits]
    assert all(m.created_at <= T1 for m in hits)
    assert "I no longer like green tea." not in [m.content for m in hits]
    later = memory.recall.search(s, "green tea", k=10)
    assert "I no longer like green tea." in [h.message.content for h in later]


def test_known_at_and_as_of_differ_for_a_late_learned_fact(memory: Memory, models: Models) -> None:
    _setup(models, memory, FakeLLM(rule_extractor))
    s = fresh_scope()
    _at(memory, T3)
    c = memory.conversations.create(s)
    # A conversation from T1, appended (imported) only at T3.
    _say(memory, s, c.id, "I like jazz.", occurred_at=T1)
    memory.longterm.flush(s, c.id)
    [fact] = memory.facts.list(s).items
    assert (fact.valid_from, fact.recorded_at) == (T1, T3)
    # True at T2 in the world, but memstrata did not know it at T2 ...
    assert memory.facts.list(s, as_of=T2).items == []
    # ... it knows now (and at T3) that it was true at T2.
    assert [f.id for f in memory.facts.list(s, as_of=T2, known_at=T3).items] == [fact.id]
    assert [f.id for f in memory.facts.list(s, as_of=T2, known_at=T3.isoformat()).items] == [
        fact.id
    ]
    # known_at alone: then, as known then.
    assert memory.facts.list(s, known_at=T2).items == []
    # Before it held, it was not true, whatever is known.
    assert memory.facts.list(s, as_of=T0, known_at=T3).items == []


def test_extraction_prompt_carries_occurred_at_and_a_found_date_sets_valid_from(
    memory: Memory, models: Models
) -> None:
    def answer(messages: list[dict[str, Any]]) -> str:
        return json.dumps(
            {
                "newFacts": [
                    {
                        "content": "User lives in Oslo",
                        "category": "context",
                        "confidence": 0.95,
                        "validFrom": "2019-06",
                    },
                    {
                        "content": "User is on holiday",
                        "category": "context",
                        "confidence": 0.9,
                        "validTo": "not a date",
                    },
                    {
                        "content": "User lived in Bergen",
                        "category": "context",
                        "confidence": 0.9,
                        "validTo": "2026-01-10",
                    },
                ]
            }
        )

    llm = FakeLLM(answer)
    _setup(models, memory, llm)
    s = fresh_scope()
    _at(memory, T2)
    c = memory.conversations.create(s)
    _say(memory, s, c.id, "I have lived in Oslo since June 2019.", occurred_at=T1)
    result = memory.longterm.flush(s, c.id)
    prompt = llm.calls[-1].messages[-1]["content"]
    assert "[2026-02-01 00:00 UTC] User: I have lived in Oslo since June 2019." in prompt
    assert "[2026-02-01 00:00 UTC] Assistant: Noted." in prompt
    assert any("validTo 'not a date' is not a date" in n for n in result.notes)
    by_content = {f.content: f for f in memory.facts.list(s).items}
    assert by_content["User lives in Oslo"].valid_from == datetime(2019, 6, 1, tzinfo=UTC)
    # Without a date from the model: the source message's time, never the run's.
    assert by_content["User is on holiday"].valid_from == T1
    assert by_content["User is on holiday"].recorded_at == T2
    # Said at T1 to have ended before T1: not true now, true before it ended (start unknown).
    assert "User lived in Bergen" not in by_content
    [bergen] = [f for f in memory.facts.list(s, status="all").items if "Bergen" in f.content]
    assert (bergen.valid_from, bergen.valid_to) == (None, datetime(2026, 1, 10, tzinfo=UTC))
    early = memory.facts.list(s, as_of=datetime(2026, 1, 9, tzinfo=UTC), known_at=T2).items
    assert _contents(early) == ["User lived in Bergen", "User lives in Oslo"]


def test_a_deerflow_import_keeps_event_time_from_the_document(memory: Memory) -> None:
    s = fresh_scope()
    _at(memory, T3)
    doc = {
        "version": "1.0",
        "lastUpdated": "2024-02-01T00:00:00Z",
        "user": {},
        "history": {},
        "facts": [
            {
                "id": "fact_1",
                "content": "Prefers tabs",
                "category": "preference",
                "confidence": 0.9,
                "createdAt": "2024-01-05T10:00:00Z",
                "source": "thread-1",
            }
        ],
    }
    memory.longterm.import_memory(s, doc)
    [fact] = memory.facts.list(s).items
    when = datetime(2024, 1, 5, 10, tzinfo=UTC)
    assert (fact.valid_from, fact.recorded_at) == (when, T3)
    # True in mid-2024 as known now; not known in mid-2024; not true in 2023.
    assert [f.id for f in memory.facts.list(s, as_of="2024-06-01", known_at=T3).items] == [fact.id]
    assert memory.facts.list(s, as_of="2024-06-01").items == []
    assert memory.facts.list(s, as_of="2023-06-01", known_at=T3).items == []


def test_a_native_export_and_import_keep_both_clocks(
    memory: Memory, tmp_path: Any, models: Models
) -> None:
    _setup(models, memory, FakeLLM(rule_extractor))
    s = fresh_scope()
    _at(memory, T0)
    c = memory.conversations.create(s)
    _say(memory, s, c.id, "I like green tea.")
    memory.longterm.flush(s, c.id)
    _at(memory, T2)
    _say(memory, s, c.id, "I no longer like green tea.")
    memory.longterm.flush(s, c.id)
    before = {f.id: f for f in memory.facts.list(s, status="all").items}
    lines: list[str] = []
    memory.transfer.export(lines.append, tenant=s.tenant, user=s.user)
    memory.users.delete(s)
    assert memory.facts.list(s, status="all").items == []
    _at(memory, T3)  # the import's own time must not show anywhere
    memory.transfer.import_(lines)
    after = {f.id: f for f in memory.facts.list(s, status="all").items}
    assert after == before


def test_an_export_made_before_the_clocks_fills_them_from_its_own_times() -> None:
    cols = ["id", "status", "created_at", "updated_at"]
    filled_cols, values = with_clocks("facts", cols, ["f1", "superseded", 10, 20])
    row = dict(zip(filled_cols, values, strict=True))
    assert (row["valid_from"], row["recorded_at"], row["superseded_at"]) == (10, 10, 20)
    _, active = with_clocks("facts", cols, ["f2", "active", 10, 20])
    assert dict(zip(filled_cols, active, strict=True))["superseded_at"] is None
    same = with_clocks("messages", ["id"], ["m1"])
    assert same == (["id"], ["m1"])


def test_bad_times_are_invalid_input(memory: Memory) -> None:
    s = fresh_scope()
    c = memory.conversations.create(s)
    for call in (
        lambda: memory.facts.list(s, as_of="yesterday"),
        lambda: memory.facts.list(s, known_at="2026-13-01"),
        lambda: memory.recall.search(s, "tea", as_of="not a time"),
        lambda: memory.context(s, c.id, as_of="soon"),
    ):
        with pytest.raises(InvalidInput):
            call()
    with pytest.raises(InvalidInput):
        memory.facts.list(s, status="superseded", as_of=T1)


def test_parsing_times() -> None:
    assert parse_instant(None, "as_of") is None
    assert parse_instant("2026-01-05T09:30:00Z", "as_of") == to_micros(T0)
    assert parse_instant("2026-01-05T09:30:00", "as_of") == to_micros(T0)  # naive: UTC
    assert parse_instant(T0, "as_of") == to_micros(T0)
    for bad in ("", "   ", "tomorrow", 12, "2026-02-30"):
        with pytest.raises(InvalidInput):
            parse_instant(bad, "as_of")
    assert parse_loose_date("2024") == datetime(2024, 1, 1, tzinfo=UTC)
    assert parse_loose_date("2024-03") == datetime(2024, 3, 1, tzinfo=UTC)
    assert parse_loose_date("2024-03-05") == datetime(2024, 3, 5, tzinfo=UTC)
    assert parse_loose_date("2024-03-05T10:00:00Z") == datetime(2024, 3, 5, 10, tzinfo=UTC)
    for wrong in ("March", "1066-10-14", "2024-13", None, 2024):
        assert parse_loose_date(wrong) is None
