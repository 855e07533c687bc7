"""A context that providers can cache: the stepped window (property tests), the order of
the tiers, ``report.cache`` (Python and REST) and the Anthropic rendering's cache marker."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from hypothesis import given, settings
from hypothesis import strategies as st

from memstrata import Memory
from memstrata.bench.prompt_cache import cacheable_prefix
from memstrata.context.layout import render
from memstrata.context.prefix import canonical, common_prefix, fingerprint
from memstrata.context.tiers import TierItem
from memstrata.context.windows import step_size, step_start
from memstrata.conversation.history import HistoryPlanner
from memstrata.domain.providers import to_anthropic
from memstrata.testing.conformance import fresh_scope
from memstrata.types import Message, Role, Status

_T0 = datetime(2026, 1, 1, tzinfo=UTC)


def _branch(turns: list[tuple[int, int]]) -> list[Message]:
    """A branch of (user tokens, assistant tokens) turns, oldest first."""
    out: list[Message] = []
    total = 0
    for t, (u, a) in enumerate(turns):
        for role, n in (("user", u), ("assistant", a)):
            i = len(out)
            total += n
            out.append(
                Message(
                    id=f"m{i:04d}",
                    conversation_id="c",
                    parent_id=None if i == 0 else f"m{i - 1:04d}",
                    role=Role(role),
                    content=f"{role} {t}",
                    files=(),
                    tool_calls=(),
                    tool_call_id=None,
                    status=Status.COMPLETE,
                    metadata={},
                    occurred_at=_T0,
                    created_at=_T0,
                    seq=i + 1,
                    depth=i,
                    token_count=n,
                    branch_tokens=total,
                )
            )
    return out


def _stepped(branch: list[Message], limit: int, low: float) -> list[Message]:
    """The window of the branch ending at its last message, as assembly chooses it."""
    leaf = branch[-1]
    start = step_start(0, leaf.branch_tokens, limit, low)
    planner = HistoryPlanner(
        system=[],
        max_tokens=limit,
        max_messages=None,
        count=lambda m: m.token_count,
        from_position=None if start == 0 else start,
    )
    planner.feed(reversed(branch))
    planner.finish()
    return planner.result(leaf.id, "o200k_base", len(branch)).messages


_turns = st.lists(st.tuples(st.integers(1, 120), st.integers(1, 200)), min_size=1, max_size=60)


@settings(max_examples=150, deadline=None)
@given(turns=_turns, limit=st.integers(50, 3000), low=st.floats(0.2, 0.9))
def test_stepped_window_keeps_the_budget_whole_turns_and_its_prefix(
    turns: list[tuple[int, int]], limit: int, low: float
) -> None:
    branch = _branch(turns)
    previous: list[Message] | None = None
    for end in range(2, len(branch) + 1, 2):  # a context after every reply
        window = _stepped(branch[:end], limit, low)
        newest = branch[end - 2 : end]
        assert window[-2:] == newest  # the newest turn is always there
        tokens = sum(m.token_count for m in window)
        # Never over the budget, unless the newest turn alone is over it.
        assert tokens <= limit or window == newest
        # Whole turns: the window starts with a user message and holds a run of the branch.
        assert window[0].role is Role.USER
        first = window[0].depth
        assert window == branch[first:end]
        if previous is not None and window[0] == previous[0]:
            # No step: the next turns only append, the start stays put.
            assert window[: len(previous)] == previous
        elif previous is not None:
            # A step moves the start forward, never back.
            assert window[0].depth > previous[0].depth
        previous = window


@given(
    base=st.integers(0, 10_000),
    span=st.integers(0, 100_000),
    limit=st.integers(1, 20_000),
    low=st.floats(0.1, 0.95),
    min_step=st.integers(1, 1000),
)
def test_step_start_fits_and_keeps_the_low_water_mark(
    base: int, span: int, limit: int, low: float, min_step: int
) -> None:
    start = step_start(base, base + span, limit, low, min_step)
    assert base <= start <= base + span
    assert base + span - start <= limit
    step = step_size(limit, low, min_step)
    assert int((1 - low) * limit) <= step <= limit
    if start > base:  # right after a step at most one step below the share
        assert base + span - start > limit - step
    # Steps are a grid from the base: the start moves only when the end passes a grid line.
    assert (start - base) % step == 0


def _item(i: str, text: str) -> TierItem:
    return TierItem(i, text, 5)


def test_cache_layout_orders_the_tiers_by_volatility() -> None:
    branch = _branch([(10, 10), (10, 10), (10, 0)])[:-1]  # ends with a user message
    system = _branch([(5, 0)])[:1]
    system = [
        Message(**{**{f: getattr(system[0], f) for f in Message.__slots__}, "role": Role.SYSTEM})
    ]
    chosen = {
        name: [_item(f"{name}-b", f"{name} two"), _item(f"{name}-a", f"{name} one")]
        for name in ("facts", "profile", "summary", "working", "plan", "iterations", "recall")
    }
    granted = dict.fromkeys(chosen, 7)
    out = render(system, branch, chosen, count=lambda m: m.token_count, granted=granted)
    kinds = [
        m["content"].split("\n")[0] if m["role"] == "system" else m["role"] for m in out.messages
    ]
    assert kinds == [
        "user 0",
        "<user-profile>",
        "<memory>",
        "<conversation-summary>",
        "user",
        "assistant",
        "user",
        "assistant",
        "<working-memory>",
        "<plan>",
        "<failed-attempts>",
        "<recalled-messages>",
        "user",
    ]
    assert out.breakpoint == 7  # the last message before the per-turn blocks
    assert out.tokens == [5, 7, 7, 7, 10, 10, 10, 10, 7, 7, 7, 7, 10]
    classic = render(
        system, branch, chosen, count=lambda m: m.token_count, granted=granted, layout="classic"
    )
    heads = [m["content"].split("\n")[0] for m in classic.messages[:9]]
    assert heads[1:8] == [
        "<user-profile>",
        "<memory>",
        "<working-memory>",
        "<plan>",
        "<failed-attempts>",
        "<conversation-summary>",
        "<recalled-messages>",
    ]
    assert classic.breakpoint == 2  # the profile and facts blocks precede the first volatile one


def test_fingerprints_share_the_prefix_of_equal_leading_messages() -> None:
    a = [{"role": "system", "content": "s"}, {"role": "user", "content": "u1"}]
    b = [*a, {"role": "assistant", "content": "a1"}]
    c = [a[0], {"role": "user", "content": "other"}]
    fa = fingerprint("x", "o200k_base", a, [3, 4])
    fb = fingerprint("y", "o200k_base", b, [3, 4, 5])
    fc = fingerprint("z", "o200k_base", c, [3, 4])
    assert common_prefix(fa.chain, fb.chain) == 7 == cacheable_prefix(a, b, [3, 4, 5])
    assert common_prefix(fa.chain, fc.chain) == 3 == cacheable_prefix(a, c, [3, 4])
    assert common_prefix((), fb.chain) == 0


_TEXTS = st.text(alphabet=st.characters(codec="utf-8"), max_size=40)
_PART = st.one_of(
    st.fixed_dictionaries({"type": st.just("text"), "text": _TEXTS}),
    st.fixed_dictionaries({"type": st.just("image_url"), "image_url": st.just({"url": "u"})}),
    st.fixed_dictionaries({"type": _TEXTS, "text": _TEXTS}),
)
_RENDERED = st.one_of(
    st.fixed_dictionaries({"role": _TEXTS, "content": _TEXTS}),
    st.fixed_dictionaries({"role": _TEXTS, "content": st.lists(_PART, max_size=3)}),
    st.fixed_dictionaries(
        {"role": st.just("assistant"), "content": st.none(), "tool_calls": st.just([{"id": "c"}])}
    ),
    st.fixed_dictionaries({"role": st.just("tool"), "content": _TEXTS, "tool_call_id": _TEXTS}),
    st.dictionaries(_TEXTS, st.one_of(_TEXTS, st.integers(), st.none()), max_size=3),
)


@settings(max_examples=300, deadline=None)
@given(_RENDERED)
def test_the_fingerprint_hashes_the_canonical_json_of_each_message(message: Any) -> None:
    # The direct path for the common shapes writes what json.dumps writes, so a stored
    # fingerprint still matches after the change.
    assert canonical(message) == json.dumps(message, ensure_ascii=False, sort_keys=True)


def test_canonical_text_keeps_escapes_and_non_ascii() -> None:
    for text in ['a "quoted" \\ line\nbreak\ttab \x00 \u2028', "déjà vu 😀"]:
        for message in (
            {"role": "assistant", "content": text},
            {"role": "user", "content": [{"type": "text", "text": text}]},
            {"content": [{"text": text, "type": "text"}], "role": "user"},
        ):
            assert canonical(message) == json.dumps(message, ensure_ascii=False, sort_keys=True)


def test_to_anthropic_marks_the_last_stable_block() -> None:
    messages: list[dict[str, Any]] = [
        {"role": "system", "content": "sys"},
        {"role": "system", "content": "<memory>\nfact\n</memory>"},
        {"role": "user", "content": "hi"},
        {
            "role": "assistant",
            "content": None,
            "tool_calls": [
                {"id": "t1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
            ],
        },
        {"role": "tool", "content": "42", "tool_call_id": "t1"},
        {"role": "assistant", "content": "it is 42"},
        {"role": "system", "content": "<recalled-messages>\nx\n</recalled-messages>"},
        {"role": "user", "content": "and now?"},
    ]
    out = to_anthropic(messages, 5)
    assert out["system"] == [
        {"type": "text", "text": "sys"},
        {"type": "text", "text": "<memory>\nfact\n</memory>"},
    ]
    roles = [t["role"] for t in out["messages"]]
    assert roles == ["user", "assistant", "user", "assistant", "user"]
    assert out["messages"][1]["content"][0] == {
        "type": "tool_use",
        "id": "t1",
        "name": "f",
        "input": {},
    }
    assert out["messages"][2]["content"][0]["type"] == "tool_result"
    marked = [b for t in out["messages"] for b in t["content"] if "cache_control" in b] + [
        b for b in out["system"] if "cache_control" in b
    ]
    assert marked == [{"type": "text", "text": "it is 42", "cache_control": {"type": "ephemeral"}}]
    # The recall block and the newest question merge into one user turn, after the marker.
    assert [b["text"] for b in out["messages"][-1]["content"]] == [
        "<recalled-messages>\nx\n</recalled-messages>",
        "and now?",
    ]
    # A breakpoint in the system part marks the last system block.
    assert to_anthropic(messages, 1)["system"][1]["cache_control"] == {"type": "ephemeral"}
    assert all("cache_control" not in b for b in to_anthropic(messages, None)["system"])


def test_report_cache_prefix_tokens_follow_the_branch(memory: Memory) -> None:
    mem = memory
    scope = fresh_scope()
    conv = mem.conversations.create(scope)
    mem.messages.append(scope, conv.id, role="system", content="You are terse.")
    mem.messages.append(scope, conv.id, role="user", content="first question")
    first = mem.context(scope, conv.id, budget=4000)
    assert first.report.cache.prefix_tokens == 0
    assert first.report.to_dict()["cache"] == {"prefix_tokens": 0, "breakpoint": 0}
    mem.messages.append(scope, conv.id, role="assistant", content="first answer")
    mem.messages.append(scope, conv.id, role="user", content="second question")
    second = mem.context(scope, conv.id, budget=4000)
    # The system message and the first question repeat; the rest is new.
    tok = mem.core.rt.tokenizer
    assert second.report.cache.prefix_tokens == sum(
        tok.count_message(m["content"]) for m in first.messages
    )
    assert second.report.cache.breakpoint == 2
    anthropic = second.to_anthropic()
    assert anthropic["messages"][-2]["content"][-1]["cache_control"] == {"type": "ephemeral"}
    assert second.to_openai() == second.messages
    # A regenerated branch does not compare with the sibling it replaces.
    other = mem.messages.append(
        scope, conv.id, role="user", content="edited", parent_id=first.window[0].parent_id
    )
    edited = mem.context(scope, conv.id, leaf_id=other.id, budget=4000)
    assert edited.report.cache.prefix_tokens == 0
    # Deleting the conversation removes its fingerprint with it.
    mem.conversations.delete(scope, conv.id)


def test_a_long_conversation_keeps_its_prefix_between_steps(memory: Memory) -> None:
    mem = memory
    mem.core.context.auto_compact = False
    scope = fresh_scope()
    conv = mem.conversations.create(scope)
    mem.messages.append(scope, conv.id, role="system", content="You are terse.")
    previous = None
    steps = 0
    for i in range(24):
        mem.messages.append(scope, conv.id, role="user", content=f"question {i} " + "w " * 30)
        ctx = mem.context(scope, conv.id, budget=700)
        assert ctx.report.total <= 700
        stable = ctx.report.cache.breakpoint
        assert stable is not None
        if previous is not None and ctx.window[0].id == previous.window[0].id:
            # No step: the previous stable part is repeated, and counted in the prefix.
            end = (previous.report.cache.breakpoint or 0) + 1
            assert ctx.messages[:end] == previous.messages[:end]
            assert ctx.report.cache.prefix_tokens >= sum(
                mem.core.rt.tokenizer.count_message(m["content"]) for m in previous.messages[:end]
            )
        elif previous is not None:
            steps += 1
            reasons = [d["reason"] for d in ctx.report.dropped if d["tier"] == "recent"]
            assert reasons
            assert reasons[0].startswith("before the window's step")
        mem.messages.append(scope, conv.id, role="assistant", content=f"answer {i} " + "a " * 40)
        previous = ctx
    assert 1 <= steps <= 24 // 3
