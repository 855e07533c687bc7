"""What long-term memory captures: the message filter, upload blocks, trivial turns and
the correction/reinforcement signals (English and Chinese)."""

from __future__ import annotations

from datetime import UTC, datetime
from itertools import count
from typing import Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from memstrata.longterm.capture import (
    capturable,
    detect_signals,
    filter_turns,
    is_trivial,
    signals_in,
    strip_uploads,
)
from memstrata.longterm.model import Signal, Turn
from memstrata.types import Message, Role, Status, ToolCall, ToolCallFunction

_T0 = datetime(2026, 1, 1, tzinfo=UTC)
_IDS = count()
CALL = ToolCall(id="call1", function=ToolCallFunction(name="search", arguments="{}"))


def msg(
    role: str,
    content: str = "hello",
    *,
    id: str | None = None,
    status: str = "complete",
    tool_calls: tuple[ToolCall, ...] = (),
    metadata: dict[str, Any] | None = None,
) -> Message:
    i = next(_IDS)
    return Message(
        id=id or f"m{i}",
        conversation_id="c1",
        parent_id=None,
        role=Role(role),
        content=content,
        files=(),
        tool_calls=tool_calls,
        tool_call_id="call1" if role == "tool" else None,
        status=Status(status),
        metadata=metadata or {},
        occurred_at=_T0,
        created_at=_T0,
        seq=i,
        depth=0,
        token_count=1,
        branch_tokens=1,
    )


def roles_and_texts(turns: list[Turn]) -> list[tuple[str, str]]:
    return [(t.role, t.text) for t in turns]


# -- capturable ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("message", "expected"),
    [
        (msg("user"), True),
        (msg("assistant"), True),
        (msg("user", metadata={"hide_from_ui": True}), False),
        (msg("user", metadata={"hide_from_ui": 0}), True),
        (msg("user", metadata={"hide_from_ui": ""}), True),
        (msg("user", metadata={"other": True}), True),
        (msg("assistant", tool_calls=(CALL,)), False),
        (msg("assistant", "", status="pending"), False),
        (msg("tool"), False),
        (msg("system"), False),
    ],
)
def test_capturable(message: Message, expected: bool):
    assert capturable(message) is expected


# -- upload blocks ---------------------------------------------------------------------------


def test_strip_uploads_removes_both_tags_any_case_and_trailing_newlines():
    text = (
        "<uploaded_files>\n- /a.pdf\n</uploaded_files>\n\n"
        "Summarise this please\n"
        "<CURRENT_UPLOADS>x.csv</CURRENT_UPLOADS>\n"
    )
    assert strip_uploads(text) == "Summarise this please"


def test_strip_uploads_needs_matching_tags():
    # A block opened with one tag and closed with the other is not an upload block.
    text = "<uploaded_files>a</current_uploads> rest"
    assert strip_uploads(text) == text


def test_strip_uploads_is_lazy_between_blocks():
    text = "<uploaded_files>a</uploaded_files>keep me<uploaded_files>b</uploaded_files>"
    assert strip_uploads(text) == "keep me"


@given(st.text())
def test_strip_uploads_is_idempotent(text: str):
    once = strip_uploads(text)
    assert strip_uploads(once) == once


# -- trivial turns ---------------------------------------------------------------------------


@pytest.mark.parametrize(
    "text",
    [
        "ok",
        "OK!",
        "Okay.",
        "  okay  ",
        "thanks",
        "Thank you!!",
        "Got it.",
        "cheers",
        "嗯",
        "嗯嗯嗯",
        "好",
        "好的",
        "好的呢",
        "好呀",
        "谢谢！",
        "感谢。",
        "多谢",
        "对",
        "是的",
        "收到",
        "明白",
        "了解",
        "知道了？",
        "ok ; ",
    ],
)
def test_trivial(text: str):
    assert is_trivial(text)


@pytest.mark.parametrize(
    "text",
    [
        "ok thanks",
        "okay, now use Rust",
        "thanks, but I prefer tabs",
        "好的，我用 Python",
        "对不起",
        "not ok",
        "",
        "...",
    ],
)
def test_not_trivial(text: str):
    assert not is_trivial(text)


# -- filter_turns ----------------------------------------------------------------------------


def test_filter_keeps_user_and_plain_assistant_messages():
    messages = [
        msg("system", "You are helpful"),
        msg("user", "I write Go at work", id="u1"),
        msg("assistant", "", tool_calls=(CALL,)),
        msg("tool", "search results"),
        msg("assistant", "  Noted, Go it is.  ", id="a1"),
    ]
    assert filter_turns(messages) == [
        Turn("u1", "user", "I write Go at work", _T0),  # each turn keeps its occurred_at
        Turn("a1", "assistant", "Noted, Go it is.", _T0),
    ]


def test_filter_drops_pending_and_empty_assistant_messages():
    messages = [
        msg("user", "I like tea"),
        msg("assistant", "   "),
        msg("assistant", "", status="pending"),
        msg("assistant", "Tea noted"),
    ]
    assert roles_and_texts(filter_turns(messages)) == [
        ("user", "I like tea"),
        ("assistant", "Tea noted"),
    ]


def test_filter_drops_hidden_user_messages():
    messages = [
        msg("user", "internal instruction", metadata={"hide_from_ui": True}),
        msg("user", "I live in Lyon"),
        msg("assistant", "Bonjour"),
    ]
    assert roles_and_texts(filter_turns(messages)) == [
        ("user", "I live in Lyon"),
        ("assistant", "Bonjour"),
    ]


def test_filter_strips_upload_blocks_from_user_text():
    messages = [
        msg("user", "<uploaded_files>/mnt/a.pdf</uploaded_files>\nI am a lawyer"),
        msg("assistant", "Understood"),
    ]
    assert roles_and_texts(filter_turns(messages)) == [
        ("user", "I am a lawyer"),
        ("assistant", "Understood"),
    ]


def test_upload_only_turn_drops_its_reply():
    messages = [
        msg("user", "<uploaded_files>/mnt/a.pdf</uploaded_files>"),
        msg("assistant", "", tool_calls=(CALL,)),
        msg("tool", "file read"),
        msg("assistant", "I read your PDF about taxes."),
        msg("user", "I prefer short answers"),
        msg("assistant", "Will do"),
    ]
    assert roles_and_texts(filter_turns(messages)) == [
        ("user", "I prefer short answers"),
        ("assistant", "Will do"),
    ]


def test_skipped_reply_is_only_the_next_one():
    messages = [
        msg("user", "<current_uploads>a</current_uploads>"),
        msg("assistant", "about the upload"),
        msg("assistant", "a second reply"),
    ]
    assert roles_and_texts(filter_turns(messages)) == [("assistant", "a second reply")]


def test_a_kept_user_message_cancels_the_pending_skip():
    messages = [
        msg("user", "<uploaded_files>a</uploaded_files>"),
        msg("user", "My name is Ana"),
        msg("assistant", "Hi Ana"),
    ]
    assert roles_and_texts(filter_turns(messages)) == [
        ("user", "My name is Ana"),
        ("assistant", "Hi Ana"),
    ]


def test_trivial_turn_and_its_reply_are_dropped():
    messages = [
        msg("user", "I use Emacs"),
        msg("assistant", "Emacs it is"),
        msg("user", "Thanks!"),
        msg("assistant", "You're welcome"),
        msg("user", "好的"),
        msg("assistant", "不客气"),
    ]
    assert roles_and_texts(filter_turns(messages)) == [
        ("user", "I use Emacs"),
        ("assistant", "Emacs it is"),
    ]


def test_filter_keeps_message_ids():
    messages = [msg("user", "x y", id="u9"), msg("assistant", "z", id="a9")]
    assert [t.message_id for t in filter_turns(messages)] == ["u9", "a9"]


_MESSAGES = st.builds(
    msg,
    st.sampled_from(["user", "assistant", "tool", "system"]),
    st.sampled_from(["ok", "I like cats", "", "<uploaded_files>f</uploaded_files>", " x "]),
)


@given(st.lists(_MESSAGES, max_size=12))
def test_filter_turns_output_is_clean(messages: list[Message]):
    turns = filter_turns(messages)
    ids = [m.id for m in messages]
    assert all(t.text and t.text == t.text.strip() for t in turns)
    assert all(t.role in ("user", "assistant") for t in turns)
    assert not any(t.role == "user" and is_trivial(t.text) for t in turns)
    # Order is kept.
    positions = [ids.index(t.message_id) for t in turns]
    assert positions == sorted(positions)


# -- signals -------------------------------------------------------------------------------

C, R = Signal.CORRECTION, Signal.REINFORCEMENT


@pytest.mark.parametrize(
    "text",
    [
        "No, that's wrong.",
        "That is incorrect",
        "You misunderstood me",
        "please TRY AGAIN",
        "redo it",
        "不对，应该用 Go",
        "你理解错了",
        "你理解有误",
        "重试一下",
        "重新来",
        "换一种写法",
        "改用 pandas",
    ],
)
def test_correction_patterns(text: str):
    assert signals_in(text) == {C}


@pytest.mark.parametrize(
    "text",
    [
        "Yes, exactly",
        "yes perfect",
        "Yes. That's right",
        "Perfect!",
        "perfect",
        "exactly right",
        "That's correct",
        "that is exactly what I wanted",
        "That's what i needed",
        "keep doing that",
        "keep that",
        "just like that",
        "Just this",
        "This is great!",
        "this is helpful",
        "This is what I wanted.",
        "对，就是这样",
        "对,就是这样！",
        "完全正确",
        "就是这个意思",
        "对，就是这个意思。",
        "正是我想要的！",
        "继续保持",
        "以后都保持这样",
        "今后保持这样。",
    ],
)
def test_reinforcement_patterns(text: str):
    assert signals_in(text) == {R}


@pytest.mark.parametrize(
    "text",
    [
        "I redone the kitchen",  # "redo" needs a word boundary
        "perfectly fine",
        "你说的对",
        "没错",
        "对的",
        "对不起",
        "完全正确吗",
        "This is greatness",
        "",
    ],
)
def test_no_signal(text: str):
    assert signals_in(text) == frozenset()


def test_correction_and_reinforcement_are_independent():
    assert signals_in("That's wrong. Yes, exactly like my first version.") == {C, R}


def test_signals_strip_before_matching():
    # "$" anchors match at the end once surrounding whitespace is gone.
    assert signals_in("  完全正确  \n") == {R}


def turn(role: str, text: str) -> Turn:
    return Turn(f"{role}-{text}", role, text)  # type: ignore[arg-type]


def test_detect_signals_reads_only_user_turns():
    turns = [turn("assistant", "that's wrong, let me redo"), turn("user", "I like it")]
    assert detect_signals(turns) == frozenset()


def test_detect_signals_unions_the_window():
    turns = [turn("user", "that's wrong"), turn("assistant", "fixed"), turn("user", "perfect")]
    assert detect_signals(turns) == {C, R}


def test_detect_signals_looks_at_the_last_six_user_turns_only():
    old = [turn("user", "you misunderstood"), turn("assistant", "sorry")]
    recent = []
    for i in range(6):  # six user turns, each answered
        recent += [turn("user", f"fact {i}"), turn("assistant", "ok")]
    assert detect_signals(old + recent) == frozenset()
    # Five later user turns keep the correction in sight, however many replies sit between.
    assert detect_signals(old + recent[2:]) == {C}
    assert detect_signals(old[1:] + recent[1:] + [turn("user", "try again")]) == {C}


_VOCAB = [
    "that's", "that", "is", "wrong", "incorrect", "you", "misunderstood", "try", "again", "redo",
    "yes,", "exactly", "perfect", "perfect.", "right", "correct", "what", "i", "wanted", "needed",
    "meant", "keep", "doing", "just", "like", "this", "great", "helpful", "不对", "你理解错了",
    "重试", "重新来", "换一种", "改用", "对，", "就是这样", "完全正确", "就是这个意思", "正是我想要的",
    "继续保持", "以后都保持这样", "。", "ok", "tea", "THAT'S", "WRONG",
]  # fmt: skip


@given(st.lists(st.sampled_from(_VOCAB), max_size=12).map(" ".join))
def test_the_substring_prefilter_never_hides_a_signal(text: str) -> None:
    from memstrata.longterm import capture

    full = frozenset(s for s, pattern in capture._PATTERNS if pattern.search(text.strip()))
    assert signals_in(text) == full
