"""Parsing a model's extraction answer: finding the object in prose and fences,
repairing a truncated one, normalising every field, and the safety rule."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstrata.longterm.model import ProposedFact, ProposedUpdate, Removal, UpdateParseError
from memstrata.longterm.parse import parse_update

ALIASES = ("f1", "f2", "f3")


def parse(doc: Any, aliases: tuple[str, ...] = ALIASES) -> ProposedUpdate:
    return parse_update(doc if isinstance(doc, str) else json.dumps(doc), aliases)


def good_fact(content: str = "Prefers tabs", **extra: Any) -> dict[str, Any]:
    return {"content": content, "category": "preference", "confidence": 0.9, **extra}


def notes_mentioning(update: ProposedUpdate, word: str) -> list[str]:
    return [n for n in update.notes if word in n]


# -- finding the object ----------------------------------------------------------------------


def test_plain_object():
    update = parse(
        {
            "profile": {"workContext": "Backend developer."},
            "newFacts": [good_fact(supersedes=["f1"], reason="changed editor")],
            "factsToRemove": [{"id": "f2", "reason": "obsolete"}],
        }
    )
    assert update == ProposedUpdate(
        profile={"workContext": "Backend developer."},
        new_facts=(
            ProposedFact(
                "Prefers tabs", "preference", 0.9, supersedes=("f1",), reason="changed editor"
            ),
        ),
        removals=(Removal("f2", "obsolete"),),
        notes=(),
    )


def test_object_wrapped_in_prose_and_fences():
    text = (
        "Sure! Here is the update {as requested}:\n"
        "```json\n"
        + json.dumps({"newFacts": [good_fact()]}, indent=2)
        + "\n```\nLet me know if you need more."
    )
    assert parse(text).new_facts == (ProposedFact("Prefers tabs", "preference", 0.9),)


def test_fence_on_the_same_line():
    text = '```json {"newFacts": [], "profile": {"topOfMind": "Exams"}}```'
    assert parse(text).profile == {"topOfMind": "Exams"}


def test_thinking_trace_with_json_like_text_before_the_answer():
    text = (
        'I think {"note": "not this"} and {"a": [1, 2]} are irrelevant.\n'
        '{"newFacts": [{"content": "Lives in Oslo", "category": "context", "confidence": 1}]}'
    )
    assert [f.content for f in parse(text).new_facts] == ["Lives in Oslo"]


def test_an_update_nested_in_a_wrapper_is_found():
    text = json.dumps({"result": {"factsToRemove": [{"id": "f1", "reason": "wrong"}]}})
    assert parse(text).removals == (Removal("f1", "wrong"),)


def test_first_matching_object_wins():
    text = json.dumps({"newFacts": [good_fact("first")]}) + json.dumps(
        {"newFacts": [good_fact("second")]}
    )
    assert [f.content for f in parse(text).new_facts] == ["first"]


def test_empty_update_is_valid():
    assert parse({"newFacts": []}) == ProposedUpdate()


@pytest.mark.parametrize(
    "text",
    [
        "",
        "no json here",
        "[1, 2, 3]",
        '{"unrelated": true}',
        '{"user": "alice"}',  # a "user" key that is not DeerFlow's section group
        "{{{{",
        '{"newFacts": ',  # truncated before any complete member
    ],
)
def test_no_update_object(text: str):
    with pytest.raises(UpdateParseError) as info:
        parse(text)
    assert info.value.raw == text


# -- truncated answers -------------------------------------------------------------------------


def test_truncated_inside_a_fact_drops_that_fact():
    complete = json.dumps({"profile": {"topOfMind": "Exams"}, "newFacts": [good_fact("one")]})
    text = complete[:-2] + ', {"content": "two is cut sho'
    update = parse(text)
    assert [f.content for f in update.new_facts] == ["one"]
    assert update.profile == {"topOfMind": "Exams"}
    assert notes_mentioning(update, "truncated")


def test_truncated_after_a_complete_fact_keeps_it():
    text = '```json\n{"newFacts": [{"content": "one", "confidence": 0.8}'
    assert [f.content for f in parse(text).new_facts] == ["one"]


def test_truncated_with_a_trailing_comma_or_dangling_key():
    base = '{"newFacts": [{"content": "one", "confidence": 0.8}]'
    for tail in (",", ', "factsToRemove"', ', "factsToRemove":', ', "factsToRemove": [{"id": "f1"'):
        update = parse(base + tail)
        assert [f.content for f in update.new_facts] == ["one"], tail
        assert update.removals == ()


def test_truncated_profile_section_is_dropped_not_cut():
    text = '{"newFacts": [], "profile": {"workContext": "Data engineer", "topOfMind": "Prep'
    update = parse(text)
    assert update.profile == {"workContext": "Data engineer"}


def test_truncated_after_a_string_escape():
    text = '{"newFacts": [{"content": "a", "confidence": 1}, {"content": "quote \\'
    assert [f.content for f in parse(text).new_facts] == ["a"]


def test_truncated_after_an_earlier_complete_unrelated_object():
    text = 'Context: {"a": 1}. Answer: {"newFacts": [{"content": "x", "confidence": 0.7}, {"con'
    assert [f.content for f in parse(text).new_facts] == ["x"]


def test_mismatched_brackets_are_not_repaired():
    with pytest.raises(UpdateParseError):
        parse('{"newFacts": [{"content": "x", "confidence": 0.7}}')


# -- profile -------------------------------------------------------------------------------


def test_profile_normalisation():
    long = "y" * 2500
    update = parse(
        {
            "profile": {
                "workContext": "  Engineer.  ",
                "hobbies": "chess",
                "topOfMind": "   ",
                "recentMonths": 42,
                "earlierContext": long,
            }
        }
    )
    assert update.profile == {"workContext": "Engineer.", "earlierContext": "y" * 2000}
    assert notes_mentioning(update, "'hobbies'")
    assert notes_mentioning(update, "profile.topOfMind")
    assert notes_mentioning(update, "profile.recentMonths")
    assert notes_mentioning(update, "truncated")


def test_profile_that_is_not_an_object():
    update = parse({"profile": "Engineer", "newFacts": []})
    assert update.profile == {}
    assert notes_mentioning(update, "profile")


def test_deerflow_shape():
    update = parse(
        {
            "user": {
                "workContext": {"summary": "Engineer", "shouldUpdate": True},
                "personalContext": {"summary": "Has a cat", "shouldUpdate": False},
                "topOfMind": {"summary": "", "shouldUpdate": True},
            },
            "history": {
                "recentMonths": {"summary": "Moved to Oslo", "shouldUpdate": True},
                "earlierContext": "not an object",
            },
            "newFacts": [{"content": "Has a cat", "category": "context", "confidence": 0.9}],
            "factsToRemove": [],
        }
    )
    assert update.profile == {"workContext": "Engineer", "recentMonths": "Moved to Oslo"}
    assert [f.content for f in update.new_facts] == ["Has a cat"]
    assert notes_mentioning(update, "history.earlierContext")


def test_profile_key_wins_over_deerflow_groups():
    update = parse(
        {
            "user": {"workContext": {"summary": "old shape", "shouldUpdate": True}},
            "profile": {"workContext": "new shape"},
        }
    )
    assert update.profile == {"workContext": "new shape"}


# -- new facts -----------------------------------------------------------------------------


def test_fact_normalisation():
    update = parse(
        {
            "newFacts": [
                {
                    "content": "  Prefers\n\n  dark   mode ",
                    "category": " Preference ",
                    "confidence": "0.85",
                    "sourceError": "  ",
                    "reason": 3,
                },
                {"content": "Wants to run a marathon", "category": "aspiration", "confidence": 2},
                {"content": "Knows SQL"},
                {"content": "x" * 1500, "category": "knowledge", "confidence": -1},
                {
                    "content": "Avoid tabs",
                    "category": "correction",
                    "confidence": 0.9,
                    "sourceError": "used  tabs",
                },
            ]
        }
    )
    assert update.new_facts == (
        ProposedFact("Prefers dark mode", "preference", 0.85),
        ProposedFact("Wants to run a marathon", "context", 1.0),
        ProposedFact("Knows SQL", "context", 0.5),
        ProposedFact("x" * 1000, "knowledge", 0.0),
        ProposedFact("Avoid tabs", "correction", 0.9, source_error="used tabs"),
    )
    assert notes_mentioning(update, "'aspiration'")
    assert notes_mentioning(update, "clamped")
    assert notes_mentioning(update, "reason is not a string")
    assert notes_mentioning(update, "newFacts[3]: content longer")


@pytest.mark.parametrize(
    "entry",
    [
        "Prefers tabs",
        ["Prefers tabs"],
        {"category": "preference", "confidence": 0.9},
        {"content": "   ", "confidence": 0.9},
        {"content": 42, "confidence": 0.9},
        {"content": "x", "confidence": True},
        {"content": "x", "confidence": "high"},
        {"content": "x", "confidence": [0.9]},
        {"content": "x", "confidence": float("nan")},
        {"content": "x", "confidence": float("inf")},
        {"content": "x", "confidence": "-inf"},
        {"content": "x", "confidence": 10**400},
    ],
)
def test_malformed_facts_are_dropped_with_a_note(entry: Any):
    update = parse({"newFacts": [entry, good_fact()]})
    assert [f.content for f in update.new_facts] == ["Prefers tabs"]
    assert notes_mentioning(update, "newFacts[0]: malformed")


def test_null_confidence_means_missing():
    update = parse({"newFacts": [{"content": "x", "confidence": None}]})
    assert update.new_facts == (ProposedFact("x", "context", 0.5),)


def test_supersedes_accepts_a_string_and_drops_unknown_aliases():
    update = parse(
        {
            "newFacts": [
                good_fact("a", supersedes="f1"),
                good_fact("b", supersedes=["f2", "f9", 7, " f3 ", "f2"]),
                good_fact("c", supersedes={"f1": True}),
            ]
        }
    )
    assert [f.supersedes for f in update.new_facts] == [("f1",), ("f2", "f3"), ()]
    assert notes_mentioning(update, "'f9'")
    assert notes_mentioning(update, "7")
    assert notes_mentioning(update, "supersedes is not a list")


def test_duplicate_new_facts_are_dropped():
    update = parse({"newFacts": [good_fact("Likes tea"), good_fact("likes  TEA")]})
    assert [f.content for f in update.new_facts] == ["Likes tea"]
    assert notes_mentioning(update, "repeats")


def test_at_most_50_new_facts():
    update = parse({"newFacts": [good_fact(f"fact {i}") for i in range(60)]})
    assert [f.content for f in update.new_facts] == [f"fact {i}" for i in range(50)]
    assert notes_mentioning(update, "first 50")


def test_new_facts_not_a_list():
    update = parse({"newFacts": {"content": "x"}})
    assert update.new_facts == ()
    assert notes_mentioning(update, "newFacts: not a list")


# -- removals ------------------------------------------------------------------------------


def test_removals_normalisation():
    update = parse(
        {
            "factsToRemove": [
                {"id": "f1", "reason": "  no longer   true "},
                {"id": "f9", "reason": "unknown alias"},
                {"id": "f2", "reason": ""},
                {"id": "f3"},
                "f3",  # DeerFlow's bare id: no reason, so not accepted
                {"id": "f1", "reason": "again"},
                7,
            ]
        }
    )
    assert update.removals == (Removal("f1", "no longer true"),)
    assert notes_mentioning(update, "'f9'")
    assert len(notes_mentioning(update, "without a reason")) == 3
    assert notes_mentioning(update, "factsToRemove[6]")


def test_at_most_50_removals():
    aliases = tuple(f"f{i}" for i in range(60))
    update = parse(
        {"factsToRemove": [{"id": a, "reason": "old"} for a in aliases]}, aliases=aliases
    )
    assert [r.alias for r in update.removals] == list(aliases[:50])
    assert notes_mentioning(update, "first 50")


def test_removals_not_a_list():
    update = parse({"factsToRemove": "f1"})
    assert update.removals == ()
    assert notes_mentioning(update, "factsToRemove: not a list")


# -- the safety rule -----------------------------------------------------------------------


def test_removal_with_a_malformed_fact_is_refused():
    text = json.dumps(
        {
            "newFacts": [good_fact(), {"content": "replacement", "confidence": "very"}],
            "factsToRemove": [{"id": "f1", "reason": "replaced"}],
        }
    )
    with pytest.raises(UpdateParseError, match="unsafe partial update") as info:
        parse_update(text, ALIASES)
    assert info.value.raw == text


def test_supersedes_with_a_malformed_fact_is_refused():
    with pytest.raises(UpdateParseError, match="unsafe partial update"):
        parse({"newFacts": [good_fact(supersedes=["f1"]), {"confidence": 0.9}]})


def test_new_facts_not_a_list_with_removals_is_refused():
    with pytest.raises(UpdateParseError, match="unsafe"):
        parse({"newFacts": "oops", "factsToRemove": [{"id": "f1", "reason": "r"}]})


def test_malformed_fact_without_removals_is_only_dropped():
    update = parse({"newFacts": [good_fact(), {"content": ""}]})
    assert len(update.new_facts) == 1


def test_invalid_removals_do_not_trigger_the_rule():
    # Nothing would be removed, so dropping the malformed fact is safe.
    update = parse(
        {
            "newFacts": [good_fact(supersedes=["f9"]), {"content": ""}],
            "factsToRemove": [{"id": "f9", "reason": "unknown"}, "f1"],
        }
    )
    assert update.removals == ()
    assert update.new_facts[0].supersedes == ()


# -- properties ----------------------------------------------------------------------------

_JSON = st.recursive(
    st.none() | st.booleans() | st.floats() | st.integers() | st.text(max_size=10),
    lambda children: (
        st.lists(children, max_size=4)
        | st.dictionaries(
            st.sampled_from(
                [
                    "newFacts",
                    "profile",
                    "factsToRemove",
                    "user",
                    "history",
                    "content",
                    "confidence",
                    "category",
                    "supersedes",
                    "id",
                    "reason",
                    "sourceError",
                    "summary",
                    "shouldUpdate",
                    "workContext",
                    "topOfMind",
                    "x",
                ]
            ),
            children,
            max_size=5,
        )
    ),
    max_leaves=20,
)


def _check(text: str) -> None:
    raw: str | None
    try:
        update = parse_update(text, ALIASES)
    except UpdateParseError as exc:
        raw = exc.raw
    else:
        raw = None
    if raw is not None:
        assert raw == text
        return
    for fact in update.new_facts:
        assert fact.content
        assert 0.0 <= fact.confidence <= 1.0
        assert set(fact.supersedes) <= set(ALIASES)
    for removal in update.removals:
        assert removal.alias in ALIASES
        assert removal.reason


@given(st.text())
def test_arbitrary_text_only_raises_update_parse_error(text: str):
    _check(text)


@given(_JSON, st.text(max_size=5), st.integers(0, 200))
def test_json_like_answers_only_raise_update_parse_error(doc: Any, prose: str, cut: int):
    text = prose + json.dumps(doc)
    _check(text)
    _check(text[: len(text) - cut])  # truncated answers too


def test_event_times_are_read_leniently_and_never_drop_a_fact():
    update = parse(
        {
            "newFacts": [
                good_fact("Lives in Oslo", validFrom="2019-06"),
                good_fact("On holiday", valid_from="2026-03-01", until="2026-03-08T00:00:00Z"),
                good_fact("Plays chess", since="sometime"),
                good_fact("Runs", validFrom="2026-05-01", validTo="2026-04-01"),
            ]
        }
    )
    oslo, holiday, chess, runs = update.new_facts
    assert oslo.valid_from == datetime(2019, 6, 1, tzinfo=UTC)
    assert oslo.valid_to is None
    assert holiday.valid_from == datetime(2026, 3, 1, tzinfo=UTC)
    assert holiday.valid_to == datetime(2026, 3, 8, tzinfo=UTC)
    assert (chess.valid_from, chess.valid_to) == (None, None)
    assert notes_mentioning(update, "'sometime' is not a date")
    assert (runs.valid_from, runs.valid_to) == (datetime(2026, 5, 1, tzinfo=UTC), None)
    assert notes_mentioning(update, "validTo before validFrom")
