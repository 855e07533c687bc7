"""Issue 28: two clocks for edits. An edit of a fact is a new version in system time (the
old content answers ``known_at`` before the edit, and stays in the history); a rewrite of a
profile section keeps its earlier version (``valid_to``, ``superseded_at``), so ``as_of``
and ``known_at`` read sections too. Every backend."""

from __future__ import annotations

from datetime import UTC, datetime

import pytest

from memstrata import Memory, Scope
from memstrata.storage.plan import Op, Query, read
from memstrata.storage.records import from_micros

S = Scope("clocks28", "u")
T1, T2, T3 = (int(datetime(2026, m, 1, tzinfo=UTC).timestamp() * 1_000_000) for m in (3, 5, 7))
BETWEEN = from_micros((T1 + T2) // 2)
LATER = from_micros(T3 + 1)


def _at(memory: Memory, micros: int) -> None:
    memory.core.rt.clock = lambda: micros


def _contents(memory: Memory, **when: object) -> list[str]:
    return [f.content for f in memory.facts.list(S, **when).items]  # type: ignore[arg-type]


def test_an_edit_is_a_new_version_in_system_time(memory: Memory) -> None:
    _at(memory, T1)
    fact = memory.facts.add(S, "drinks tea every morning")
    _at(memory, T2)
    edited = memory.facts.edit(S, fact.id, content="drinks coffee every morning")
    assert edited.id == fact.id
    _at(memory, T3)
    # As known before the edit: the old content. As known now: the corrected one, which
    # memstrata now believes held all along (an edit corrects belief, not the world).
    assert _contents(memory, as_of=BETWEEN) == ["drinks tea every morning"]
    assert _contents(memory, as_of=BETWEEN, known_at=LATER) == ["drinks coffee every morning"]
    assert _contents(memory, as_of=LATER) == ["drinks coffee every morning"]
    assert _contents(memory) == ["drinks coffee every morning"]
    events = memory.facts.history(S, fact.id)
    assert [(e.event, e.content) for e in events][-1] == ("edited", "drinks tea every morning")
    # Edited twice: each version answers for its own span of system time.
    _at(memory, T3)
    memory.facts.edit(S, fact.id, content="drinks water every morning")
    _at(memory, T3 + 10)
    assert _contents(memory, as_of=BETWEEN) == ["drinks tea every morning"]
    assert _contents(memory, as_of=from_micros(T3 - 1)) == ["drinks coffee every morning"]
    assert _contents(memory, as_of=LATER) == ["drinks water every morning"]


def test_deleting_an_edited_fact_removes_its_versions(memory: Memory) -> None:
    _at(memory, T1)
    fact = memory.facts.add(S, "lives in Lyon")
    _at(memory, T2)
    memory.facts.edit(S, fact.id, content="lives in Lille")
    receipt = memory.facts.delete(S, fact.id)
    assert receipt.verified is True, receipt.findings
    assert _contents(memory, as_of=BETWEEN) == []

    def versions() -> Op[int]:
        rows = yield Query("SELECT count(*) FROM fact_versions")
        return int(rows[0][0])

    assert memory.core.engine.run(read(versions)) == 0


def test_a_rewritten_profile_section_keeps_its_earlier_version(memory: Memory) -> None:
    from memstrata.longterm import store
    from memstrata.storage.plan import write

    def rewrite(text: str) -> None:
        rt = memory.core.rt
        memory.core.engine.run(write(lambda: store.set_profile(rt, S, {"workContext": text})))

    _at(memory, T1)
    rewrite("works at a bakery")
    _at(memory, T2)
    rewrite("works at a library")
    _at(memory, T3)

    def work(**when: object) -> str:
        sections = memory.longterm.profile(S, **when)  # type: ignore[arg-type]
        return next(p.summary for p in sections if p.name == "workContext")

    assert work() == "works at a library"
    assert work(as_of=BETWEEN) == "works at a bakery"  # as known then
    # As known now: the new text holds from its rewrite on, the old one until then.
    assert work(as_of=BETWEEN, known_at=LATER) == "works at a bakery"
    assert work(as_of=LATER) == "works at a library"
    assert work(as_of=from_micros(T1 - 1)) == ""  # nothing written yet
    # The context's as_of reads the section as it was then.
    cid = memory.conversations.create(S).id
    memory.messages.append(S, cid, role="user", content="hello")
    ctx = memory.context(S, cid, budget=2000, as_of=BETWEEN)
    text = " ".join(str(m.get("content", "")) for m in ctx.messages)
    assert "bakery" in text
    assert "library" not in text


@pytest.mark.parametrize("field", ["as_of", "known_at"])
def test_profile_times_are_checked(memory: Memory, field: str) -> None:
    from memstrata.errors import InvalidInput

    with pytest.raises(InvalidInput):
        memory.longterm.profile(S, **{field: "yesterday-ish"})  # type: ignore[arg-type]
