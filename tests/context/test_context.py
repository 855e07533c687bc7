"""Context assembly and rolling compaction: the report adds up, nothing is lost silently,
summaries serve only the branches they cover, and a bad summary never replaces a good one."""

from __future__ import annotations

import random
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memstrata import Memory, Scope
from memstrata.config import Settings
from memstrata.context import COMPACT_JOB, Context, TierItem, TierPolicy, TierRequest
from memstrata.context.summarize import SECTIONS, extractive_summary, summary_problem
from memstrata.context.windows import RECALL_ROOM_MAX, context_window
from memstrata.llm import OpenAICompatibleLLM, llm_from_settings
from memstrata.runtime import Runtime
from memstrata.storage.plan import Op
from memstrata.testing import FakeLLM
from memstrata.testing.conformance import fresh_scope
from memstrata.tokens import get_tokenizer
from memstrata.types import Message
from support import Models

GOOD = "\n".join(f"### {name}\n- point about {name.lower()} 42" for name in SECTIONS)
WORDS = ["alpha", "bravo", "charlie", "delta", "echo", "foxtrot", "golf", "hotel", "india"]


@pytest.fixture
def mem(tmp_path: Path) -> Iterator[Memory]:
    m = Memory.open(
        f"sqlite:///{(tmp_path / 'ctx.db').as_posix()}",
        settings=Settings(home=tmp_path, worker="off"),
    )
    m.core.context.auto_compact = False
    # These tests are about the built-in tiers; tests/context/test_context_recall.py covers recall.
    m.core.recall.tier.k = 0
    yield m
    m.close()


def _text(i: int, rng: random.Random, words: int = 40) -> str:
    body = " ".join(rng.choice(WORDS) for _ in range(words))
    return f"Message {i}: {body}. Decision {i} uses port {8000 + i}."


def _chain(mem: Memory, scope: Scope, n: int, seed: int = 1) -> tuple[str, list[Message]]:
    rng = random.Random(seed)
    conv = mem.conversations.create(scope)
    out = []
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        out.append(mem.messages.append(scope, conv.id, role=role, content=_text(i, rng)))
    return conv.id, out


def _tokens(ctx: Context) -> int:
    tok = get_tokenizer(ctx.report.encoding)
    return sum(tok.count_message(m["content"] or "") for m in ctx.messages)


def check_accounting(mem: Memory, scope: Scope, cid: str, ctx: Context, leaf_id: str) -> None:
    """The report adds up and every message of the branch is accounted for."""
    report = ctx.report
    assert sum(t.granted for t in report.tiers.values()) == report.total == _tokens(ctx)
    assert report.total <= report.budget or report.newest_turn_over_budget
    path = mem.messages.path(scope, cid, leaf_id)
    on_path = {m.id for m in path}
    window = {m.id for m in [*ctx.system, *ctx.window]}
    covered = -1
    if report.summary_id is not None:
        summary = mem.compaction.summary(scope, cid, leaf_id=leaf_id)
        assert summary.id == report.summary_id
        assert summary.up_to_id in on_path  # never a summary of another branch
        covered = summary.up_to_depth
    ranges = [d["range"] for d in report.dropped if "range" in d]
    for m in path:
        if m.id in window or m.depth <= covered:
            continue
        assert any(r.get("from_depth", 0) <= m.depth <= r["to_depth"] for r in ranges), (
            f"message at depth {m.depth} is neither in the window, summarised nor dropped"
        )
    for r in ranges:
        assert r["to_id"] in on_path


def test_big_branched_conversation_loses_nothing(mem: Memory) -> None:
    scope = fresh_scope()
    rng = random.Random(7)
    conv = mem.conversations.create(scope)
    leaves: list[str] = []
    parent: str | None = None
    for i in range(2000):
        role = "user" if i % 2 == 0 else "assistant"
        if i > 10 and i % 97 == 0:  # regenerate: a sibling of the last message
            last = mem.messages.get(scope, conv.id, parent) if parent else None
            leaves.append(parent or "")
            parent = last.parent_id if last else None
            role = last.role.value if last else role
        msg = mem.messages.append(
            scope, conv.id, role=role, content=_text(i, rng, rng.randint(5, 60)), parent_id=parent
        )
        parent = msg.id
        if i % 400 == 399:  # forced compactions along the way
            assert mem.compact(scope, conv.id).outcome == "compacted"
    leaves.append(parent or "")
    mem.compact(scope, conv.id)
    used_summary = skipped_summary = 0
    for leaf in leaves:
        for budget in (150, 2000, 8000, 40_000):
            ctx = mem.context(scope, conv.id, leaf_id=leaf, budget=budget)
            check_accounting(mem, scope, conv.id, ctx, leaf)
            if ctx.report.summary_id is None:
                skipped_summary += 1
            else:
                used_summary += 1
    # Both kinds of branch were exercised.
    assert used_summary
    assert skipped_summary


def test_summary_never_serves_a_branch_that_diverged_before_it(mem: Memory) -> None:
    scope = fresh_scope()
    cid, msgs = _chain(mem, scope, 80)
    fork = mem.messages.append(scope, cid, role="user", content="fork " * 50, parent_id=msgs[9].id)
    mem.conversations.set_active_leaf(scope, cid, msgs[-1].id)
    result = mem.compact(scope, cid)
    assert result.outcome == "compacted"
    assert result.summary is not None
    ctx = mem.context(scope, cid, leaf_id=fork.id, budget=100_000)
    assert ctx.report.summary_id is None
    assert [m["content"] for m in ctx.messages] == [m.content for m in msgs[:10]] + [fork.content]
    # A branch forking after the cover point keeps using it.
    summary = mem.compaction.summary(scope, cid)
    late = next(m for m in msgs if m.depth == summary.up_to_depth + 2)
    child = mem.messages.append(scope, cid, role="user", content="late fork", parent_id=late.id)
    ctx = mem.context(scope, cid, leaf_id=child.id, budget=100_000)
    assert ctx.report.summary_id == summary.id
    check_accounting(mem, scope, cid, ctx, child.id)


@pytest.mark.parametrize(
    "setup",
    ["error", "empty", "degenerate", "missing-sections", "exhausted"],
)
def test_bad_llm_answer_keeps_the_previous_summary(mem: Memory, setup: str, models: Models) -> None:
    scope = fresh_scope()
    cid, _ = _chain(mem, scope, 60)
    llm = FakeLLM([GOOD])
    models(mem, llm=llm)
    first = mem.compact(scope, cid)
    assert first.outcome == "compacted"
    before = mem.compaction.summary(scope, cid)
    assert before.content == GOOD
    _chain_more(mem, scope, cid, 40)
    replies = {
        "error": [],
        "empty": ["   "],
        "degenerate": ["\n".join(f"### {n}\n- ok" for n in SECTIONS)],
        "missing-sections": ["### Goal\n- something useful enough to keep around"],
        "exhausted": [],
    }[setup]
    bad = FakeLLM(replies)
    models(mem, llm=bad)
    if setup == "error":
        bad.fail_next(1)
    result = mem.compact(scope, cid)
    assert result.outcome == "failed"
    assert result.reason
    assert mem.compaction.summary(scope, cid).id == before.id
    log = mem.compaction.log(scope, cid)
    assert log[0]["outcome"] == "failed"
    assert log[0]["reason"] == result.reason
    ctx = mem.context(scope, cid, budget=100_000)
    assert ctx.report.summary_id == before.id


def _chain_more(mem: Memory, scope: Scope, cid: str, n: int) -> None:
    rng = random.Random(n)
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        mem.messages.append(scope, cid, role=role, content=_text(1000 + i, rng))


def test_compaction_is_incremental_and_follows_the_prompt(mem: Memory, models: Models) -> None:
    scope = fresh_scope()
    cid, _ = _chain(mem, scope, 60)
    seen: list[list[Message]] = []
    mem.core.context.on_pre_compaction(lambda s, c, batch: seen.append(list(batch)))
    llm = FakeLLM([GOOD, GOOD.replace("42", "43")])
    models(mem, llm=llm)
    first = mem.compact(scope, cid)
    assert first.outcome == "compacted"
    assert first.summary is not None
    _chain_more(mem, scope, cid, 40)
    second = mem.compact(scope, cid)
    assert second.outcome == "compacted"
    assert second.summary is not None
    prompt = llm.calls[1].messages
    assert "<previous-summary>" in prompt[1]["content"]
    assert GOOD in prompt[1]["content"]
    assert all(f"### {name}" in prompt[0]["content"] for name in SECTIONS)
    s1, s2 = mem.compaction.summary(scope, cid), first.summary
    assert s1.version == 2
    assert s1.previous_id == getattr(s2, "id", None)
    # The hook saw exactly the newly covered messages, each once.
    ids = [m.id for batch in seen for m in batch]
    assert len(ids) == len(set(ids))
    assert ids[-1] == s1.up_to_id


def test_compaction_skips_small_increments(mem: Memory) -> None:
    scope = fresh_scope()
    conv = mem.conversations.create(scope)
    for i in range(10):
        mem.messages.append(scope, conv.id, role="user", content=f"short {i}")
    result = mem.compact(scope, conv.id)
    assert result.outcome == "skipped"
    cid, _ = _chain(mem, scope, 60)
    assert mem.compact(scope, cid).outcome == "compacted"
    mem.messages.append(scope, cid, role="user", content="one more")
    mem.messages.append(scope, cid, role="assistant", content="ok")
    again = mem.compact(scope, cid)
    assert again.outcome == "skipped"
    assert "new tokens" in (again.reason or "")


def test_extractive_summary_is_deterministic_and_valid(mem: Memory) -> None:
    scope = fresh_scope()
    _, msgs = _chain(mem, scope, 30)
    a = extractive_summary(None, msgs)
    assert a == extractive_summary(None, msgs)
    assert summary_problem(a) is None
    b = extractive_summary(a, msgs[:4])
    assert summary_problem(b) is None
    assert summary_problem("") == "empty summary"


def test_newest_turn_over_budget_is_flagged(mem: Memory) -> None:
    scope = fresh_scope()
    conv = mem.conversations.create(scope)
    mem.messages.append(scope, conv.id, role="system", content="You are terse.")
    mem.messages.append(scope, conv.id, role="user", content="hello")
    mem.messages.append(scope, conv.id, role="user", content="word " * 400)
    ctx = mem.context(scope, conv.id, budget=50)
    assert ctx.report.newest_turn_over_budget
    assert ctx.report.over_budget
    assert ctx.report.total == _tokens(ctx) > 50
    assert ctx.messages[0] == {"role": "system", "content": "You are terse."}
    assert ctx.messages[-1]["content"] == "word " * 400
    check_accounting(mem, scope, conv.id, ctx, ctx.report.leaf_id or "")


def test_tiers_priorities_minimums_and_hash(mem: Memory) -> None:
    scope = fresh_scope()
    cid, _ = _chain(mem, scope, 30)
    mem.working.put(scope, "# User\n- name: Ada\n- prefers short answers\n" + "- note\n" * 100)
    mem.plans.put(scope, cid, {"steps": ["collect", "build", "ship"]})
    full = mem.context(scope, cid, budget=100_000)
    # Working memory and plan change per turn: after the window's stable part (cache layout).
    # The chain ends with a user message and its reply: the newest turn, after the blocks.
    heads = [m["content"].split("\n")[0] for m in full.messages]
    assert heads[-4:-2] == ["<working-memory>", "<plan>"]
    assert [m["role"] for m in full.messages[-2:]] == ["user", "assistant"]
    assert full.report.cache.breakpoint == len(full.messages) - 5
    classic = mem.context(scope, cid, budget=100_000, layout="classic")
    assert [m["content"].split("\n")[0] for m in classic.messages[:2]] == [
        "<working-memory>",
        "<plan>",
    ]
    assert full.report.tiers["working"].granted > 0
    check_accounting(mem, scope, cid, full, full.report.leaf_id or "")
    again = mem.context(scope, cid, budget=100_000)
    assert again.report.hash == full.report.hash
    assert again.messages == full.messages
    # A tight budget: the window (first priority) takes it all, the rest is dropped with reasons.
    tight = mem.context(scope, cid, budget=500)
    assert tight.report.tiers["working"].granted == 0
    assert {d["tier"] for d in tight.report.dropped} >= {"working", "recent"}
    check_accounting(mem, scope, cid, tight, tight.report.leaf_id or "")
    # A minimum reserves room for working memory ahead of the window.
    mem.core.context.set_policy("working", TierPolicy(priority=4, minimum=300))
    reserved = mem.context(scope, cid, budget=500)
    assert reserved.report.tiers["working"].granted > 0
    assert reserved.report.total <= 500
    assert reserved.report.hash != tight.report.hash
    check_accounting(mem, scope, cid, reserved, reserved.report.leaf_id or "")


class FakeRecall:
    """A tier provider as the recall feature will plug in: whole items with provenance."""

    tier = "recall"

    def __init__(self) -> None:
        self.requests: list[TierRequest] = []

    def provide(self, rt: Runtime, request: TierRequest) -> Op[list[TierItem]]:
        self.requests.append(request)
        yield from ()
        return [
            request.item(f"hit-{i}", f"[user] recalled fact number {i} " * 5, message_id=f"m{i}")
            for i in range(5)
        ]


def test_provider_tier_plugs_in(mem: Memory) -> None:
    scope = fresh_scope()
    cid, msgs = _chain(mem, scope, 6)
    provider = FakeRecall()
    mem.core.context.add_provider(provider)
    ctx = mem.context(scope, cid, budget=100_000, query="port", layout="classic")
    assert provider.requests[0].query == "port"
    assert provider.requests[0].leaf_id == msgs[-1].id
    block = next(m for m in ctx.messages if m["content"].startswith("<recalled-messages>"))
    assert block["content"].count("recalled fact") == 25
    check_accounting(mem, scope, cid, ctx, msgs[-1].id)
    window_tokens = ctx.report.tiers["recent"].granted
    # What the window leaves goes to the tier (classic layout); the cache layout keeps a
    # per-turn tier of an ongoing conversation to a small room (5 % of the budget).
    small = mem.context(scope, cid, budget=window_tokens + 60, layout="classic")
    assert 0 < small.report.tiers["recall"].items < 5
    cached = mem.context(scope, cid, budget=window_tokens + 60)
    assert cached.report.tiers["recall"].granted <= 0.05 * (window_tokens + 60)
    # ... and at most RECALL_ROOM_MAX tokens however large the budget.
    large = mem.context(scope, cid, budget=100_000, query="port")
    assert 0 < large.report.tiers["recall"].granted <= RECALL_ROOM_MAX
    assert large.report.tiers["recall"].items < 5
    dropped = [d for d in small.report.dropped if d["tier"] == "recall"]
    assert dropped
    assert dropped[0]["provenance"]["message_id"].startswith("m")
    check_accounting(mem, scope, cid, small, msgs[-1].id)


def test_compaction_job_is_queued_and_runs(mem: Memory) -> None:
    scope = fresh_scope()
    cid, _ = _chain(mem, scope, 80)
    mem.core.context.auto_compact = True
    mem.core.context.debounce_s = 0.0
    ctx = mem.context(scope, cid, budget=3000)
    assert ctx.report.compaction_due
    jobs = mem.jobs.list(tenant=scope.tenant).items
    assert [j.kind for j in jobs if j.kind == COMPACT_JOB] == [COMPACT_JOB]
    assert mem.jobs.run_pending([COMPACT_JOB]) == 1
    assert mem.compaction.log(scope, cid)[0]["outcome"] == "compacted"
    after = mem.context(scope, cid, budget=3000)
    assert not after.report.compaction_due
    assert after.report.summary_id is not None
    # The cache layout's compaction covers the turns before the window's next step: the
    # window starts right after the summary, nothing between them is dropped.
    assert after.report.covered_up_to == after.window[0].parent_id
    assert not [d for d in after.report.dropped if d["tier"] == "recent"]
    assert ctx.compact_before is not None
    check_accounting(mem, scope, cid, after, after.report.leaf_id or "")


def test_llm_port_configuration() -> None:
    assert llm_from_settings(Settings()) is None
    client = llm_from_settings(
        Settings(llm_model="gpt-4o-mini", llm_base_url="http://127.0.0.1:9/v1", llm_retries=0)
    )
    assert isinstance(client, OpenAICompatibleLLM)
    assert client.model == "gpt-4o-mini"
    assert context_window("openai/gpt-4o-2024-08-06") == 128_000
    assert context_window("claude-sonnet-4-5") == 200_000
    assert context_window("unknown-model") == 128_000


def test_context_of_an_empty_conversation(mem: Memory) -> None:
    scope = fresh_scope()
    conv = mem.conversations.create(scope)
    ctx = mem.context(scope, conv.id)
    assert ctx.messages == []
    assert ctx.report.total == 0
    data: dict[str, Any] = ctx.to_dict()
    assert data["report"]["budget"] == 8000


def test_cli_compact_and_bench(tmp_path: Path) -> None:
    from typer.testing import CliRunner

    from memstrata.bench import run_bench
    from memstrata.cli import app

    url = f"sqlite:///{(tmp_path / 'cli.db').as_posix()}"
    mem = Memory.open(url, settings=Settings(home=tmp_path, worker="off"))
    scope = Scope("t", "u")
    try:
        cid, _ = _chain(mem, scope, 60)
    finally:
        mem.close()
    args = ["compact", cid, "--tenant", "t", "--user", "u", "--db", url, "--json"]
    result = CliRunner().invoke(app, args)
    assert result.exit_code == 0, result.output
    assert '"outcome": "compacted"' in result.output
    again = CliRunner().invoke(app, args)
    assert '"outcome": "skipped"' in again.output
    missing = CliRunner().invoke(app, ["compact", cid, "--tenant", "t", "--user", "x", "--db", url])
    assert missing.exit_code == 1
    out = tmp_path / "context.json"
    data = run_bench("context", out=out, sizes=[120])
    assert data["name"] == "context"
    row = data["rows"][0]
    assert row["messages"] == 120
    assert row["calls"] == 300
    assert row["context_p95_ms"] >= row["context_p50_ms"] > 0
    assert out.exists()
