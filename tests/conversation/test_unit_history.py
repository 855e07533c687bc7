"""The pure parts of conversation memory: placement, turn selection, rendering, ids."""

from __future__ import annotations

import subprocess
import sys
import uuid
from datetime import UTC, datetime
from pathlib import Path

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstrata.conversation.history import HistoryPlanner
from memstrata.conversation.tree import place
from memstrata.domain.render import to_openai, to_text
from memstrata.errors import InvalidInput
from memstrata.ids import new_id, parse_id
from memstrata.instants import to_micros
from memstrata.storage.records import to_message
from memstrata.types import FileRef, Message, Role, Scope, Status, ToolCall, occurred_micros

_T0 = datetime(2026, 1, 1, tzinfo=UTC)


def msg(
    i: int, role: str, content: str = "x", *, depth: int | None = None, tokens: int = 10, **kw
) -> Message:
    return Message(
        id=f"m{i}",
        conversation_id="c",
        parent_id=None if i == 0 else f"m{i - 1}",
        role=Role(role),
        content=content,
        files=tuple(kw.get("files", ())),
        tool_calls=tuple(kw.get("tool_calls", ())),
        tool_call_id=kw.get("tool_call_id"),
        status=Status(kw.get("status", "complete")),
        metadata={},
        occurred_at=_T0,
        created_at=_T0,
        seq=i + 1,
        depth=i if depth is None else depth,
        token_count=tokens,
        branch_tokens=tokens * (i + 1),
    )


def plan(branch: list[Message], system: int, max_tokens: int | None, max_messages: int = 500):
    planner = HistoryPlanner(
        system=branch[:system],
        max_tokens=max_tokens,
        max_messages=max_messages,
        count=lambda m: m.token_count,
    )
    planner.feed(reversed(branch[system:]))
    planner.finish()
    return planner.result(branch[-1].id, "o200k_base", len(branch))


def ids(history) -> list[str]:
    return [m.id for m in history.messages]


def test_whole_turns_dropped_oldest_first() -> None:
    b = [msg(0, "system"), msg(1, "user"), msg(2, "assistant"), msg(3, "user"), msg(4, "assistant")]
    h = plan(b, 1, max_tokens=35)
    assert ids(h) == ["m0", "m3", "m4"]
    assert h.truncated
    assert not h.over_budget
    assert h.tokens == 30


def test_newest_turn_kept_over_budget() -> None:
    b = [msg(0, "user"), msg(1, "assistant", tokens=500)]
    h = plan(b, 0, max_tokens=100)
    assert ids(h) == ["m0", "m1"]
    assert h.over_budget
    assert not h.truncated


def test_tool_results_stay_with_their_call() -> None:
    call = ToolCall.model_validate({"id": "t", "function": {"name": "f", "arguments": "{}"}})
    b = [
        msg(0, "user"),
        msg(1, "assistant", content="", tool_calls=[call]),
        msg(2, "tool", tool_call_id="t"),
        msg(3, "assistant"),
        msg(4, "user"),
        msg(5, "assistant"),
    ]
    h = plan(b, 0, max_tokens=30)
    assert ids(h) == ["m4", "m5"]  # the tool turn goes as a whole, never half
    h = plan(b, 0, max_tokens=60)
    assert ids(h) == [m.id for m in b]


def test_preamble_before_first_user_message_is_one_turn() -> None:
    b = [msg(0, "system"), msg(1, "assistant"), msg(2, "user"), msg(3, "assistant")]
    assert ids(plan(b, 1, max_tokens=30)) == ["m0", "m2", "m3"]
    assert ids(plan(b, 1, max_tokens=40)) == ["m0", "m1", "m2", "m3"]


def test_pending_messages_are_left_out() -> None:
    b = [msg(0, "user"), msg(1, "assistant", content="", status="pending")]
    h = plan(b, 0, max_tokens=None)
    assert ids(h) == ["m0"]


def test_max_messages_counts_whole_turns() -> None:
    b = [msg(i, "user" if i % 2 == 0 else "assistant") for i in range(6)]
    assert ids(plan(b, 0, max_tokens=None, max_messages=3)) == ["m4", "m5"]
    assert ids(plan(b, 0, max_tokens=None, max_messages=4)) == ["m2", "m3", "m4", "m5"]


def test_placement_tracks_depth_tokens_and_system_run() -> None:
    root = place(None, None, "s0", Role.SYSTEM, 5)
    assert (root.depth, root.branch_tokens, root.system_tail_id) == (0, 5, "s0")
    s0 = msg(0, "system", tokens=5)
    s1 = place(s0, "m0", "m1", Role.SYSTEM, 7)
    assert (s1.depth, s1.branch_tokens, s1.system_tail_id) == (1, 12, "m1")
    u = place(s0, "m0", "m1", Role.USER, 7)
    assert u.system_tail_id == "m0"
    assert place(None, None, "u0", Role.USER, 3).system_tail_id is None


def test_to_openai_files_tools_and_placeholders() -> None:
    image = FileRef(type="image", transfer_method="remote_url", url="https://example.invalid/a.png")
    local = FileRef(type="image", transfer_method="local_file", upload_file_id="f1")
    doc = FileRef(
        type="document", transfer_method="local_file", upload_file_id="f2", filename="a.pdf"
    )
    call = ToolCall.model_validate({"id": "t", "function": {"name": "f", "arguments": "{}"}})
    b = [
        msg(0, "user", "look", files=[image, local, doc]),
        msg(1, "assistant", "", tool_calls=[call]),
        msg(2, "tool", "42", tool_call_id="t"),
        msg(
            3,
            "assistant",
            "done",
            files=[FileRef(type="image", transfer_method="tool_file", tool_file_id="x")],
        ),
    ]
    out = to_openai(b)
    assert out[0] == {
        "role": "user",
        "content": [
            {
                "type": "image_url",
                "image_url": {"url": "https://example.invalid/a.png", "detail": "high"},
            },
            {"type": "text", "text": "[image]"},
            {"type": "text", "text": "[document: a.pdf]"},
            {"type": "text", "text": "look"},
        ],
    }
    assert out[1]["content"] is None
    assert out[1]["tool_calls"][0]["function"]["name"] == "f"
    assert out[2] == {"role": "tool", "content": "42", "tool_call_id": "t"}
    assert out[3] == {"role": "assistant", "content": "[image]\ndone"}
    assert to_openai(b[:1], resolver=lambda ref: "data:image/png;base64,AA")[0]["content"][1] == {
        "type": "image_url",
        "image_url": {"url": "data:image/png;base64,AA", "detail": "high"},
    }
    assert "id" not in out[0]


def test_to_text_prefixes() -> None:
    image = FileRef(type="image", transfer_method="remote_url", url="https://example.invalid/a.png")
    b = [msg(0, "system", "sys"), msg(1, "user", "hi", files=[image]), msg(2, "assistant", "hello")]
    assert to_text(b) == "Human: [image] hi\nAssistant: hello"
    assert to_text(b, human_prefix="U", ai_prefix="A") == "U: [image] hi\nA: hello"


def test_ids_are_uuid7_and_increasing() -> None:
    made = [new_id() for _ in range(2000)]
    assert made == sorted(made)
    assert len(set(made)) == len(made)
    assert all(uuid.UUID(i).version == 7 for i in made)
    assert parse_id(made[0].upper()) == made[0]
    with pytest.raises(InvalidInput):
        parse_id("not-a-uuid")


@pytest.mark.parametrize("bad", ["", "../x", "a/b", "a\x00", "x" * 129, " a"])
def test_scope_names_are_validated(bad: str) -> None:
    with pytest.raises(InvalidInput):
        Scope(tenant=bad, user="u")
    with pytest.raises(InvalidInput):
        Scope(tenant="t", user="u", agent=bad)


def test_generated_sync_facade_is_current() -> None:
    root = Path(__file__).resolve().parents[2]
    result = subprocess.run(
        [sys.executable, str(root / "scripts" / "unasync.py"), "--check"],
        capture_output=True,
        text=True,
    )
    assert result.returncode == 0, result.stderr


# Stored instants from year 1 to 9999, with the whole seconds and their neighbours weighted in.
_STORED_MICROS = st.one_of(
    st.integers(-62_135_596_800_000_000, 253_402_300_799_999_999),
    st.integers(-62_135_596_799, 253_402_300_799).map(lambda s: s * 1_000_000),
    st.integers(-62_135_596_799, 253_402_300_799).map(lambda s: s * 1_000_000 - 1),
)


@settings(max_examples=500, deadline=None)
@given(_STORED_MICROS)
def test_occurred_micros_is_to_micros_of_the_datetime_without_building_it(micros: int) -> None:
    row = ("m", "c", None, "user", "hi", None, None, None, "complete", None, micros, micros)
    stored = to_message((*row, 1, 0, 1, 1, None, 0))
    assert occurred_micros(stored) == to_micros(stored.occurred_at)  # read as stored, then built
    assert occurred_micros(stored) == to_micros(stored.occurred_at)  # and once it is a datetime
    given_dt = msg(0, "user")
    assert occurred_micros(given_dt) == to_micros(_T0)
