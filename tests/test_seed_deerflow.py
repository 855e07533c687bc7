"""DeerFlow's long-term memory semantics, made exact (one test per behaviour)."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest

from longterm_support import rule_extractor
from memstrata import Memory, Scope
from memstrata.config import Settings
from memstrata.longterm.capture import detect_signals
from memstrata.longterm.model import Signal, Turn
from memstrata.testing import FakeLLM, override

S = Scope("t1", "alice")


def _open(tmp_path: Path, **settings: Any) -> Memory:
    db = f"sqlite:///{(tmp_path / 'm.db').as_posix()}"
    return Memory.open(db, settings=Settings(home=str(tmp_path), **settings))


@pytest.fixture
def mem(tmp_path: Path):
    m = _open(tmp_path)
    with override(m, facts_llm=FakeLLM(rule_extractor), facts_embedder=None):
        yield m
    m.close()


def test_capture_default_is_auto_on_with_a_configured_llm_off_without(tmp_path: Path):
    assert Settings().longterm_capture == "auto"
    with _open(tmp_path / "a") as off:
        assert off.longterm.kit.capture is False
        assert off.longterm.status()["capture_mode"] == "auto"
        cid = off.conversations.create(S).id
        off.messages.append(S, cid, role="user", content="I like tea")
        assert off.jobs.list(tenant=S.tenant).items == []  # nothing queued without a model
    on = _open(tmp_path / "b", llm_model="fake-chat", llm_base_url="fake://")
    with on:
        assert on.longterm.kit.capture is True
        cid = on.conversations.create(S).id
        on.messages.append(S, cid, role="user", content="I like tea")
        assert [j.kind for j in on.jobs.list(tenant=S.tenant).items] == ["longterm.extract"]
    with _open(tmp_path / "c", longterm_capture=False, llm_model="fake-chat") as forced:
        assert forced.longterm.kit.capture is False
        assert forced.longterm.status()["capture_mode"] == "off"


def test_signals_are_looked_for_over_the_last_six_user_turns():
    turns = [Turn("u0", "user", "That's wrong, I meant Oslo.")]
    for i in range(5):  # five more user turns, each answered: eleven messages after it
        turns += [Turn(f"a{i}", "assistant", "ok"), Turn(f"u{i + 1}", "user", f"next {i}")]
    turns.append(Turn("a5", "assistant", "done"))
    # Six user turns hold the correction, though it is 11 messages back.
    assert detect_signals(turns) == frozenset({Signal.CORRECTION})
    turns.append(Turn("u6", "user", "one more"))
    assert detect_signals(turns) == frozenset()


def test_extraction_waits_for_an_assistant_reply_unless_flushed(mem):
    cid = mem.conversations.create(S).id
    mem.messages.append(S, cid, role="user", content="I like green tea.")
    waiting = mem.longterm.flush(S, cid, wait_for_reply=True)  # how the queued job calls it
    assert waiting.outcome == "waiting"
    assert mem.facts.list(S).items == []
    assert mem.longterm.updates(S) == []  # nothing marked as read
    mem.messages.append(S, cid, role="assistant", content="Noted!")
    assert mem.longterm.flush(S, cid, wait_for_reply=True).outcome == "applied"
    assert [f.content for f in mem.facts.list(S).items] == ["User likes green tea"]
    # A direct flush does not wait.
    other = mem.conversations.create(S).id
    mem.messages.append(S, other, role="user", content="I work as a nurse.")
    assert mem.longterm.flush(S, other).outcome == "applied"


def test_the_queued_job_waits_for_the_reply(mem):
    mem.longterm.kit.capture = True
    mem.longterm.kit.debounce_s = 0.0
    cid = mem.conversations.create(S).id
    mem.messages.append(S, cid, role="user", content="I like green tea.")
    mem.longterm.observe(S, cid)
    mem.core.run_pending(max_jobs=5)
    assert mem.facts.list(S).items == []


def test_profile_and_facts_share_one_2000_token_cap(mem):
    long = " ".join(["detail"] * 550)  # about 550 tokens, under 4000 characters
    mem.longterm.import_memory(
        S,
        {
            "user": {"workContext": {"summary": long}, "topOfMind": {"summary": long}},
            "history": {"recentMonths": {"summary": long}},
            "facts": [
                {"content": f"fact number {i} " + " ".join(["word"] * 40), "confidence": 0.9}
                for i in range(20)
            ],
        },
    )
    cid = mem.conversations.create(S).id
    mem.messages.append(S, cid, role="user", content="hi")
    tiers = mem.context(S, cid, budget=100_000).report.tiers
    assert tiers["facts"].granted > 0
    assert tiers["profile"].granted > 0
    assert tiers["facts"].granted + tiers["profile"].granted <= 2000
    assert tiers["facts"].asked + tiers["profile"].asked > 2000


def test_with_many_facts_the_profile_is_served_first_and_facts_keep_their_share(mem):
    # DeerFlow injects the profile before the facts: many facts must not crowd it out.
    mem.longterm.import_memory(
        S,
        {
            "user": {
                "workContext": {"summary": "Runs the platform team at a logistics firm. " * 8},
                "topOfMind": {"summary": "Planning the move of the fleet to new servers. " * 8},
            },
            "facts": [
                {"content": f"fact number {i} " + " ".join(["word"] * 40), "confidence": 0.9}
                for i in range(60)
            ],
        },
    )
    cid = mem.conversations.create(S).id
    mem.messages.append(S, cid, role="user", content="hi")
    ctx = mem.context(S, cid, budget=100_000)
    tiers = ctx.report.tiers
    assert tiers["profile"].granted == tiers["profile"].asked > 0
    assert tiers["facts"].granted >= 500  # the facts' documented minimum share
    assert tiers["facts"].granted + tiers["profile"].granted <= 2000
    assert "logistics firm" in "".join(str(m["content"]) for m in ctx.messages)


def test_lenient_memory_json_import_warns_per_fact_and_imports_the_rest(mem):
    doc = {
        "facts": [
            {"id": "fact_aaaa1111", "content": "Likes tea", "confidence": None},
            {"id": "fact_bbbb2222", "content": "Lives in Oslo"},
            {"id": "fact_cccc3333", "content": "Works nights", "confidence": "high"},
            {"id": "fact_dddd4444", "content": "Has a cat", "confidence": "0.8"},
            {"id": "fact_eeee5555", "content": "Speaks Norwegian", "confidence": 0.95},
        ]
    }
    result = mem.longterm.import_memory(S, doc)
    assert result["facts_added"] == 5
    assert [w["field"] for w in result["warnings"]] == [
        "facts[0].confidence",
        "facts[1].confidence",
        "facts[2].confidence",
        "facts[3].confidence",
    ]
    assert result["warnings"][0]["fact_id"] == "fact_aaaa1111"
    got = {f.content: f.confidence for f in mem.facts.list(S).items}
    assert got == {
        "Likes tea": 0.5,
        "Lives in Oslo": 0.5,
        "Works nights": 0.5,
        "Has a cat": 0.8,
        "Speaks Norwegian": 0.95,
    }


def test_export_keeps_fact_ids_source_and_the_last_change_time(mem, tmp_path: Path):
    doc = {
        "lastUpdated": "2026-01-01T00:00:00Z",
        "facts": [
            {
                "id": "fact_aaaa1111",
                "content": "Likes tea",
                "confidence": 0.9,
                "source": "thread-42",
                "createdAt": "2026-01-01T00:00:00Z",
            },
            {"id": "fact_bbbb2222", "content": "Lives in Oslo", "confidence": 0.9},
        ],
    }
    mem.longterm.import_memory(S, doc)
    assert mem.facts.get(S, "fact_aaaa1111").content == "Likes tea"
    changed = max(f.updated_at for f in mem.facts.list(S).items)
    out = mem.longterm.export(S)
    by_id = {f["id"]: f for f in out["facts"]}
    assert set(by_id) == {"fact_aaaa1111", "fact_bbbb2222"}
    assert by_id["fact_aaaa1111"]["source"] == "thread-42"
    assert by_id["fact_bbbb2222"]["source"] == "imported"
    assert out["lastUpdated"] == changed.replace(tzinfo=None).isoformat() + "Z"
    # Importing the export elsewhere keeps the ids again; a taken id gets a new one.
    with _open(tmp_path / "other") as other:
        other.longterm.import_memory(S, out)
        assert other.facts.get(S, "fact_aaaa1111").content == "Likes tea"
    bob = Scope("t1", "bob")
    assert mem.longterm.import_memory(bob, out)["facts_added"] == 2
    assert {f.id for f in mem.facts.list(bob).items}.isdisjoint(by_id)
