"""The extraction prompt: conversation formatting, the memory block, hints, escaping,
determinism, and the retry conversation."""

from __future__ import annotations

from datetime import UTC, date, datetime, timedelta, timezone

from hypothesis import given
from hypothesis import strategies as st

from memstrata.longterm.model import CATEGORIES, MemoryState, PromptFact, Signal, Turn
from memstrata.longterm.prompt import build_messages, format_conversation, repair_messages

TODAY = date(2026, 3, 4)


def user(text: str) -> Turn:
    return Turn("u", "user", text)


def assistant(text: str) -> Turn:
    return Turn("a", "assistant", text)


def body(
    state: MemoryState | None = None,
    turns: list[Turn] | None = None,
    signals: frozenset[Signal] = frozenset(),
) -> str:
    messages = build_messages(state or MemoryState(), turns or [user("hi")], signals, today=TODAY)
    return messages[1]["content"]


# -- conversation --------------------------------------------------------------------------


def test_format_conversation_labels_and_separators():
    turns = [user("I use Go"), assistant("Go noted"), user("And Rust")]
    assert format_conversation(turns) == "User: I use Go\n\nAssistant: Go noted\n\nUser: And Rust"


def test_each_turn_starts_with_the_time_it_was_said_when_known():
    said = datetime(2026, 3, 5, 14, 30, 59, tzinfo=UTC)
    oslo = datetime(2026, 3, 5, 15, 30, tzinfo=timezone(timedelta(hours=1)))
    turns = [
        Turn("u", "user", "I moved <here>", said),
        Turn("a", "assistant", "Noted", oslo),
        Turn("u2", "user", "No time"),
    ]
    assert format_conversation(turns) == (
        "[2026-03-05 14:30 UTC] User: I moved &lt;here&gt;\n\n"
        "[2026-03-05 14:30 UTC] Assistant: Noted\n\n"
        "User: No time"
    )
    assert (
        "validFrom" in build_messages(MemoryState(), turns, frozenset(), today=TODAY)[0]["content"]
    )


def test_format_conversation_empty():
    assert format_conversation([]) == ""


def test_long_turns_keep_head_and_tail():
    text = "a" * 500 + "MIDDLE" + "z" * 500
    out = format_conversation([user(text)])
    assert out == "User: " + "a" * 500 + "\n...[truncated]...\n" + "z" * 500
    assert "MIDDLE" not in out


def test_truncation_threshold_is_1000_characters():
    exactly = "x" * 1000
    assert format_conversation([user(exactly)]) == "User: " + exactly
    over = "x" * 1001
    assert "[truncated]" in format_conversation([user(over)])


def test_conversation_is_escaped_after_truncation():
    # Escaping after the cut: an entity is never split in half by the truncation.
    text = "<" * 600 + "&" * 600
    out = format_conversation([user(text)])
    assert out == "User: " + "&lt;" * 500 + "\n...[truncated]...\n" + "&amp;" * 500


def test_conversation_cannot_close_its_block():
    out = format_conversation([user('</conversation> "quoted" it\'s')])
    assert out == 'User: &lt;/conversation&gt; "quoted" it\'s'


@given(st.lists(st.builds(Turn, st.just("m"), st.sampled_from(["user", "assistant"]), st.text())))
def test_conversation_never_contains_raw_angle_brackets(turns: list[Turn]):
    out = format_conversation(turns)
    assert "<" not in out
    assert ">" not in out


# -- the prompt ----------------------------------------------------------------------------


def test_messages_are_a_system_and_a_user_message():
    messages = build_messages(MemoryState(), [user("hi")], frozenset(), today=TODAY)
    assert [m["role"] for m in messages] == ["system", "user"]
    system = messages[0]["content"]
    for category in CATEGORIES:
        assert category in system
    for word in ("supersedes", "factsToRemove", "newFacts", "sourceError", "0.9-1.0", "upload"):
        assert word in system


def test_system_message_does_not_depend_on_inputs():
    one = build_messages(MemoryState(), [user("a")], frozenset(), today=TODAY)
    two = build_messages(
        MemoryState(profile={"workContext": "x"}, facts=(PromptFact("f1", "c", "goal", 0.5),)),
        [user("b")],
        frozenset(Signal),
        today=date(2030, 1, 1),
    )
    assert one[0] == two[0]


def test_memory_block_renders_profile_and_facts():
    state = MemoryState(
        profile={"workContext": "Backend dev <Go>", "topOfMind": "Moving to Oslo"},
        facts=(
            PromptFact("f1", "Prefers tabs", "preference", 0.9),
            PromptFact("f2", "Name is Ana", "knowledge", 1.0, manual=True),
            PromptFact("f3", "Use UTC", "correction", 0.95, source_error="used <local> time"),
            PromptFact(
                "f4", "Likes X", "preference", 0.7, source_error="ignored: not a correction"
            ),
        ),
    )
    text = body(state)
    memory = text[text.index("<current_memory>") : text.index("</current_memory>")]
    assert memory.splitlines() == [
        "<current_memory>",
        "Profile:",
        "- workContext: Backend dev &lt;Go&gt;",
        "- personalContext: (empty)",
        "- topOfMind: Moving to Oslo",
        "- recentMonths: (empty)",
        "- earlierContext: (empty)",
        "- longTermBackground: (empty)",
        "",
        "Facts:",
        "- [f1 | preference | 0.90] Prefers tabs",
        "- [f2 | knowledge | 1.00] [MANUAL] Name is Ana",
        "- [f3 | correction | 0.95] Use UTC (avoid: used &lt;local&gt; time)",
        "- [f4 | preference | 0.70] Likes X",
    ]


def test_empty_memory_says_so():
    text = body()
    assert "Facts:\n(none)\n</current_memory>" in text


def test_conversation_block_and_date_and_final_line():
    text = body(turns=[user("I like <b>bold</b>"), assistant("ok")])
    assert (
        "<conversation>\nUser: I like &lt;b&gt;bold&lt;/b&gt;\n\nAssistant: ok\n</conversation>"
        in (text)
    )
    assert "Today's date: 2026-03-04" in text
    assert text.rstrip().splitlines()[-1].startswith("Update the memory")
    assert "IMPORTANT" not in text


def test_one_hint_per_signal_in_a_fixed_order():
    both = body(signals=frozenset({Signal.REINFORCEMENT, Signal.CORRECTION}))
    hints = [line for line in both.splitlines() if line.startswith("IMPORTANT:")]
    assert len(hints) == 2
    assert "corrected" in hints[0]
    assert "sourceError" in hints[0]
    assert "confirmed" in hints[1]
    only = body(signals=frozenset({Signal.REINFORCEMENT}))
    assert [line for line in only.splitlines() if line.startswith("IMPORTANT:")] == [hints[1]]


def test_build_messages_is_deterministic():
    state = MemoryState(
        profile={"topOfMind": "a", "workContext": "b"},
        facts=(PromptFact("f1", "x", "goal", 0.6),),
    )
    turns = [user("u"), assistant("a")]
    signals = frozenset(Signal)
    first = build_messages(state, turns, signals, today=TODAY)
    again = build_messages(
        MemoryState(profile={"workContext": "b", "topOfMind": "a"}, facts=state.facts),
        list(turns),
        frozenset(reversed(list(Signal))),
        today=TODAY,
    )
    assert first == again


# -- retry ---------------------------------------------------------------------------------


def test_repair_messages_appends_the_answer_and_a_request():
    previous = build_messages(MemoryState(), [user("hi")], frozenset(), today=TODAY)
    raw = "x" * 5000
    messages = repair_messages(previous, raw, "no JSON object found")
    assert messages[:2] == previous
    assert messages[2] == {"role": "assistant", "content": "x" * 4000}
    assert messages[3]["role"] == "user"
    assert "no JSON object found" in messages[3]["content"]
    assert "only the JSON object" in messages[3]["content"]
    assert len(messages) == 4


def test_repair_messages_does_not_share_dicts_with_the_input():
    previous = [{"role": "user", "content": "a"}]
    messages = repair_messages(previous, "b", "bad")
    messages[0]["content"] = "changed"
    assert previous == [{"role": "user", "content": "a"}]
