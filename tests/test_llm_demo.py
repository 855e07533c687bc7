"""The demo model (``MEMSTRATA_LLM_BASE_URL=fake://``): rule-based answers to memstrata's
own extraction and compaction prompts, and openly selected."""

from __future__ import annotations

import json
import logging
from datetime import date
from types import SimpleNamespace
from typing import Any, Literal

import anyio
import pytest

import memstrata.llm as llm_package
from memstrata import Memory, Scope
from memstrata.config import Settings
from memstrata.context.summarize import build_prompt, summary_problem
from memstrata.llm import llm_from_settings
from memstrata.llm.demo import DemoLLM, answer
from memstrata.longterm.model import MemoryState, PromptFact, Signal, Turn
from memstrata.longterm.prompt import build_messages, repair_messages
from memstrata.types import Role


def extract(
    turns: list[tuple[Literal["user", "assistant"], str]], facts: list[PromptFact] | None = None
) -> dict:
    state = MemoryState(profile={}, facts=tuple(facts or ()))
    messages = build_messages(
        state,
        [Turn(f"m{i}", r, t) for i, (r, t) in enumerate(turns)],
        frozenset({Signal.CORRECTION}),
        today=date(2026, 11, 25),
    )
    return json.loads(answer(messages))


def test_preferences_names_and_work_become_facts_and_profile() -> None:
    out = extract(
        [
            ("user", "Hi, my name is Ada Lovelace. I work as a data engineer. I love hiking."),
            ("assistant", "Nice to meet you."),
            ("user", "I hate loud bars, and I live in Oslo."),
        ]
    )
    contents = [f["content"] for f in out["newFacts"]]
    assert contents == [
        "User likes hiking",
        "User's name is Ada Lovelace",
        "User dislikes loud bars",
    ]
    assert out["profile"] == {
        "workContext": "Works as a data engineer.",
        "personalContext": "Lives in Oslo.",
    }
    assert out["factsToRemove"] == []


def test_a_change_of_mind_supersedes_the_remembered_fact() -> None:
    known = [PromptFact("f1", "User likes seafood", "preference", 0.95, manual=False)]
    out = extract([("user", "I no longer like seafood.")], known)
    assert out["newFacts"] == [
        {
            "content": "User no longer likes seafood",
            "category": "preference",
            "confidence": 0.9,
            "supersedes": ["f1"],
            "reason": "the user changed their mind",
        }
    ]
    # What is already remembered is not proposed again.
    assert extract([("user", "I like seafood.")], known)["newFacts"] == []


def test_a_correction_records_what_the_assistant_got_wrong() -> None:
    out = extract(
        [
            ("user", "Which year did the bridge open?"),
            ("assistant", "It opened in 1990."),
            ("user", "No, it opened in 1992."),
        ]
    )
    (fact,) = out["newFacts"]
    assert fact["category"] == "correction"
    assert fact["sourceError"] == "It opened in 1990."
    assert "1992" in fact["content"]


def test_a_repair_request_gets_the_same_answer() -> None:
    state = MemoryState(profile={}, facts=())
    first = build_messages(
        state, [Turn("m1", "user", "I like tea.")], frozenset(), today=date(2026, 1, 1)
    )
    assert answer(repair_messages(first, "oops", "not JSON")) == answer(first)


def _message(role: Role, text: str, n: int) -> Any:
    # The prompt builder reads a message's role and content only.
    return SimpleNamespace(id=f"m{n}", role=role, content=text)


def test_summaries_have_the_five_sections_and_pass_the_checks() -> None:
    turns = [
        _message(Role.USER, "Plan a trip to Bergen. We travel in May. Is the funicular open?", 0),
        _message(Role.ASSISTANT, "Yes, it runs daily.", 1),
        _message(Role.USER, "Book the hotel by the harbour.", 2),
    ]
    text = answer(build_prompt(None, turns))
    assert summary_problem(text) is None
    assert "- Plan a trip to Bergen." in text.split("### Important")[0]
    assert "- We travel in May." in text
    again = answer(build_prompt(text, [_message(Role.USER, "We are four people.", 3)]))
    assert summary_problem(again) is None
    assert "- We travel in May." in again
    assert "- We are four people." in again
    assert "- Plan a trip to Bergen." in again.split("### Important")[0]


def test_chat_replies_name_the_question_and_the_memory() -> None:
    messages = [
        {"role": "system", "content": "<memory>\n[preference | 0.95] User likes tea\n</memory>"},
        {"role": "user", "content": "What should I drink?"},
    ]
    assert (
        answer(messages)
        == "(demo model) You asked: What should I drink? I remember: User likes tea."
    )
    llm = DemoLLM()
    assert llm.complete(messages) == anyio.run(lambda: llm.acomplete(messages))


def test_fake_url_selects_the_demo_model_and_says_so(monkeypatch, caplog) -> None:
    monkeypatch.setattr(llm_package, "_demo_announced", False)
    # Whatever an earlier test in this worker did to logging, this logger reaches caplog.
    monkeypatch.setattr(llm_package.log, "disabled", False)
    monkeypatch.setattr(llm_package.log, "propagate", True)
    # (and its parent: a server started in this worker sends memstrata's logs to stderr only)
    monkeypatch.setattr(logging.getLogger("memstrata"), "propagate", True)
    with caplog.at_level(logging.WARNING, logger="memstrata.llm"):
        llm = llm_from_settings(Settings(llm_base_url="fake://", llm_model="whatever"))
        llm_from_settings(Settings(llm_base_url="FAKE://x", llm_model="other"))
    assert isinstance(llm, DemoLLM)
    assert [r.getMessage() for r in caplog.records].count(caplog.records[0].getMessage()) == 1
    assert "demo model" in caplog.records[0].getMessage()
    assert not isinstance(
        llm_from_settings(Settings(llm_base_url="http://localhost:1/v1", llm_model="m")), DemoLLM
    )


def test_a_memory_extracts_with_the_demo_model(tmp_path) -> None:
    settings = Settings(
        home=tmp_path,
        llm_base_url="fake://",
        llm_model="demo",
        worker="off",
        longterm_capture=True,
        embedder="none",
    )
    scope = Scope("t", "u")
    with Memory.open(settings=settings) as mem:
        conv = mem.conversations.create(scope)
        mem.messages.append(
            scope, conv.id, role="user", content="Call me Sam. I prefer aisle seats."
        )
        mem.messages.append(scope, conv.id, role="assistant", content="Sure.")
        assert mem.longterm.flush(scope, conv.id).outcome == "applied"
        facts = sorted(f.content for f in mem.facts.list(scope).items)
    assert facts == ["User likes aisle seats", "User's name is Sam"]


@pytest.mark.parametrize("text", ["", "   "])
def test_empty_prompts_still_get_an_answer(text: str) -> None:
    assert answer([{"role": "user", "content": text}]).startswith("(demo model)")


@pytest.mark.parametrize(
    ("said", "learnt"),
    [
        (
            "Please remember that I always want aisle seats on long flights.",
            ["User always wants aisle seats on long flights"],
        ),
        (
            "I usually fly economy, but I never check bags.",
            ["User usually flies economy", "User never checks bags"],
        ),
        ("I'm allergic to peanuts.", ["User is allergic to peanuts"]),
        ("My favourite colour is blue.", ["User's favourite colour is blue"]),
        ("Remember: I need a quiet room", ["User needs a quiet room"]),
        ("remember the meeting is on Friday", ["User asked to remember: the meeting is on Friday"]),
    ],
)
def test_remember_habit_allergy_and_my_x_lines_become_facts(said: str, learnt: list[str]) -> None:
    assert [f["content"] for f in extract([("user", said)])["newFacts"]] == learnt


def test_a_new_value_of_my_x_supersedes_the_old_one() -> None:
    known = [PromptFact("f1", "User's home airport is OSL", "context", 0.9, manual=False)]
    (fact,) = extract([("user", "My home airport is BGO now.")], known)["newFacts"]
    assert fact["content"] == "User's home airport is BGO now"
    assert fact["supersedes"] == ["f1"]


def test_a_memory_learns_a_remember_request_with_the_demo_model(tmp_path) -> None:
    settings = Settings(
        home=tmp_path,
        llm_base_url="fake://",
        llm_model="demo",
        worker="off",
        longterm_capture=True,
        embedder="none",
    )
    scope = Scope("t", "u")
    with Memory.open(settings=settings) as mem:
        conv = mem.conversations.create(scope)
        text = "Please remember that I always want aisle seats on long flights."
        mem.messages.append(scope, conv.id, role="user", content=text)
        mem.messages.append(scope, conv.id, role="assistant", content="Noted.")
        assert mem.longterm.flush(scope, conv.id).outcome == "applied"
        facts = [f.content for f in mem.facts.list(scope).items]
    assert facts == ["User always wants aisle seats on long flights"]
