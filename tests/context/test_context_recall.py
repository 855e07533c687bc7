"""The recall tier of ``mem.context``: relevant past messages of the same user, never
the window's, never another scope's, under the one budget."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta

import anyio
import pytest

from memstrata import Memory, Scope
from memstrata.api._async import AsyncMemory
from memstrata.context import Context
from memstrata.errors import InvalidInput
from memstrata.recall.tier import render_item
from memstrata.testing import FakeEmbedder
from memstrata.testing.conformance import fresh_scope
from memstrata.tokens import get_tokenizer
from memstrata.types import Message

LONG_AGO = datetime(2023, 3, 14, 9, 30, tzinfo=UTC)
FACT = "My sister Ottilie lives in Reykjavik and keeps three goats named after planets"
CHATTER = [
    "Can you suggest a quick pasta recipe for tonight?",
    "Try spaghetti aglio e olio: garlic, olive oil, chili and parsley.",
    "Nice, and what wine would go with it?",
    "A crisp white such as a Vermentino works well.",
    "Thanks, I also need to plan my week at work.",
    "Start with the deadlines, then block time for deep work.",
]


@pytest.fixture
def mem(memory: Memory) -> Memory:
    memory.core.recall.use(FakeEmbedder(64))
    memory.core.context.auto_compact = False
    return memory


def _old_fact(mem: Memory, scope: Scope, text: str = FACT) -> Message:
    """A fact said in an earlier conversation of the same user, among other messages."""
    conv = mem.conversations.create(scope, title="long ago")
    mem.messages.append(scope, conv.id, role="user", content="Hello there!", occurred_at=LONG_AGO)
    fact = mem.messages.append(scope, conv.id, role="user", content=text, occurred_at=LONG_AGO)
    mem.messages.append(
        scope, conv.id, role="assistant", content="Goats in Iceland, lovely.", occurred_at=LONG_AGO
    )
    return fact


def _today(mem: Memory, scope: Scope, question: str) -> tuple[str, list[Message]]:
    conv = mem.conversations.create(scope, title="today")
    start = LONG_AGO + timedelta(days=400)
    out = []
    for i, text in enumerate([*CHATTER, question]):
        role = "user" if i % 2 == 0 else "assistant"
        out.append(
            mem.messages.append(
                scope, conv.id, role=role, content=text, occurred_at=start + timedelta(minutes=i)
            )
        )
    return conv.id, out


def _recall_block(ctx: Context) -> str:
    blocks = [m["content"] for m in ctx.messages if m["content"].startswith("<recalled-messages>")]
    assert len(blocks) <= 1
    return blocks[0] if blocks else ""


def _check_report(ctx: Context) -> None:
    report = ctx.report
    tok = get_tokenizer(report.encoding)
    counted = sum(tok.count_message(m["content"] or "") for m in ctx.messages)
    assert sum(t.granted for t in report.tiers.values()) == report.total == counted
    assert report.total <= report.budget


def test_an_old_fact_from_another_conversation_is_recalled(mem: Memory) -> None:
    scope = fresh_scope()
    fact = _old_fact(mem, scope)
    cid, msgs = _today(mem, scope, "Where does my sister Ottilie live?")
    ctx = mem.context(scope, cid, budget=4000)  # query: the newest user message
    block = _recall_block(ctx)
    assert render_item(fact) in block.splitlines()
    # Dated: a heading with the day, the messages of that day under it.
    lines = block.splitlines()
    assert lines[1] == "[2023-03-14]"
    assert lines[2].startswith("user: ")
    recall = ctx.report.tiers["recall"]
    assert 1 <= recall.items <= 8
    assert 0 < recall.granted <= recall.asked
    assert ctx.report.to_dict()["tiers"]["recall"]["granted"] == recall.granted
    # The block changes every turn: after the window's stable part, just before the newest
    # user message (the cache layout); the classic layout puts it before the window.
    contents = [m["content"] for m in ctx.messages]
    assert contents.index(msgs[0].content) < contents.index(block) == len(contents) - 2
    assert contents[-1] == "Where does my sister Ottilie live?"
    classic = [
        m["content"] for m in mem.context(scope, cid, budget=4000, layout="classic").messages
    ]
    assert classic.index(block) < classic.index(msgs[0].content)
    _check_report(ctx)
    # An explicit query wins over the newest message.
    other = mem.context(scope, cid, budget=4000, query="goats named after planets")
    assert render_item(fact) in _recall_block(other)


def test_keyword_recall_without_an_embedder(mem: Memory) -> None:
    mem.core.recall.use(None)
    scope = fresh_scope()
    fact = _old_fact(mem, scope)
    cid, _ = _today(mem, scope, "Remind me about Ottilie in Reykjavik")
    ctx = mem.context(scope, cid, budget=4000)
    assert render_item(fact) in _recall_block(ctx)
    _check_report(ctx)


def test_the_window_is_not_repeated(mem: Memory) -> None:
    scope = fresh_scope()
    fact = _old_fact(mem, scope)
    # The current conversation talks about the same thing: those messages are in the window.
    cid, msgs = _today(mem, scope, "Ottilie's goats in Reykjavik: tell me more about the goats")
    ctx = mem.context(scope, cid, budget=4000)
    block = _recall_block(ctx).splitlines()
    window = {m.id for m in ctx.window}
    assert window == {m.id for m in msgs}
    assert render_item(fact) in block
    for m in ctx.window:
        assert render_item(m) not in block
    # A tighter budget trims the window; what falls out of it may be recalled, never
    # what stayed in it.
    tight = mem.context(scope, cid, budget=60, query="pasta garlic wine goats")
    kept = tight.window
    assert 0 < len(kept) < len(msgs)
    tight_block = _recall_block(tight).splitlines()
    for m in kept:
        assert render_item(m) not in tight_block
    _check_report(tight)


def test_a_pending_reply_leaves_the_query_to_the_user_message(mem: Memory) -> None:
    scope = fresh_scope()
    fact = _old_fact(mem, scope)
    cid, _ = _today(mem, scope, "Where does my sister Ottilie live?")
    pending = mem.messages.append(scope, cid, role="assistant", content="", status="pending")
    ctx = mem.context(scope, cid, budget=4000)
    assert ctx.report.leaf_id == pending.id
    block = _recall_block(ctx)
    assert render_item(fact) in block.splitlines()
    assert render_item(pending) not in block.splitlines()  # the empty pending reply
    _check_report(ctx)


def test_another_scope_is_never_recalled(mem: Memory) -> None:
    scope = fresh_scope()
    other_user = Scope(scope.tenant, scope.user + "-other")
    other_tenant = Scope(scope.tenant + "-other", scope.user)
    agent_a, agent_b = Scope(scope.tenant, scope.user, "a"), Scope(scope.tenant, scope.user, "b")
    for n, owner in enumerate((other_user, other_tenant, agent_b)):
        _old_fact(mem, owner, f"canary{n} zebra password is hunter{n} for Ottilie")
    mine = _old_fact(mem, agent_a, "My zebra password hint is a song for Ottilie")
    cid, _ = _today(mem, agent_a, "What is my zebra password for Ottilie?")
    ctx = mem.context(agent_a, cid, budget=8000)
    text = "\n".join(m["content"] for m in ctx.messages)
    assert "canary" not in text
    assert "hunter" not in text
    assert render_item(mine) in _recall_block(ctx)
    # Without an agent the user's own conversations (every agent) are searched, still
    # never the other user's or tenant's.
    own = mem.context(scope, mem.conversations.create(scope).id, query="zebra password canary")
    own_text = _recall_block(own)
    assert "canary2" in own_text  # agent b belongs to the same user
    assert "canary0" not in own_text
    assert "canary1" not in own_text


def test_report_adds_up_and_stays_within_budget(mem: Memory) -> None:
    scope = fresh_scope()
    for i in range(12):
        _old_fact(mem, scope, f"Fact {i}: Ottilie's goat number {i} likes carrots and hay")
    cid, _ = _today(mem, scope, "Which goat of Ottilie likes carrots and hay?")
    for budget in (120, 300, 700, 2000, 8000):
        classic_granted = 0
        for layout in ("classic", "cache"):
            ctx = mem.context(scope, cid, budget=budget, layout=layout)
            _check_report(ctx)
            recall = ctx.report.tiers["recall"]
            assert recall.items <= mem.core.recall.tier.k
            lines = _recall_block(ctx).splitlines()[1:-1]
            # One line per item, plus a heading per day.
            assert len([x for x in lines if not x.startswith("[")]) == recall.items
            if budget >= 700 and layout == "classic":
                assert recall.items > 3  # it takes what the window leaves
            if layout == "cache":  # an ongoing conversation: a small room, a stable prefix
                assert recall.granted <= classic_granted
            classic_granted = max(classic_granted, recall.granted)
    mem.core.recall.tier.k = 3
    few = mem.context(scope, cid, budget=8000, layout="classic")
    assert few.report.tiers["recall"].items == 3
    with pytest.raises(InvalidInput):
        mem.core.recall.tier.k = -1


def test_a_tiny_budget_drops_the_recall_tier_with_a_reason(mem: Memory) -> None:
    scope = fresh_scope()
    _old_fact(mem, scope)
    cid, _ = _today(mem, scope, "Where does my sister Ottilie live?")
    ctx = mem.context(scope, cid, budget=60)
    recall = ctx.report.tiers["recall"]
    assert recall.asked > 0
    assert recall.granted == 0
    assert recall.items == 0
    assert _recall_block(ctx) == ""
    dropped = [d for d in ctx.report.dropped if d["tier"] == "recall"]
    over = [d for d in dropped if d["reason"] == "over budget"]
    assert over  # what the gate let in, and the budget had no room for
    assert {"message_id", "conversation_id"} <= set(over[0]["provenance"])
    # The rest are candidates the gate turned away, each with its verdict.
    assert all(d["provenance"].get("rejected") == d["reason"] for d in dropped if d not in over)
    _check_report(ctx)


def test_sync_and_async_give_the_same_context(mem: Memory) -> None:
    scope = fresh_scope()
    _old_fact(mem, scope)
    cid, _ = _today(mem, scope, "Where does my sister Ottilie live?")
    sync = mem.context(scope, cid, budget=3000)

    async def go() -> Context:
        return await AsyncMemory(mem.core).context(scope, cid, budget=3000)

    both = anyio.run(go)
    # The second context repeats the first whole: all of it is a cacheable prefix.
    assert (sync.report.cache.prefix_tokens, both.report.cache.prefix_tokens) == (
        0,
        both.report.total,
    )
    both.report.cache.prefix_tokens = 0
    assert both.to_dict() == sync.to_dict()
    assert both.report.tiers["recall"].items > 0


def test_common_terms_are_probed_within_a_bound(memory: Memory) -> None:
    from memstrata.recall.catchup import CatchUp
    from memstrata.recall.index import keyword_search, term_postings
    from memstrata.storage.plan import read

    scope = fresh_scope()
    conv = memory.conversations.create(scope)
    ids = [
        memory.messages.append(scope, conv.id, role="user", content=text).id
        for text in ("apple pie", "apple tart", "apple juice", "pear cake")
    ]
    dialect = memory.core.engine.dialect
    run = memory.core.engine.run
    CatchUp(memory.core).keywords()  # what a search does first (full-text rows batched)
    # A posting list is read up to its cap, newest first, on every backend.
    apples = run(read(lambda: term_postings(dialect, scope, "apple", 2)))
    assert len(apples) == 2
    assert apples[0].seq > apples[1].seq
    hits = run(read(lambda: keyword_search(dialect, scope, ["apple", "pear"], 10, cap=3)))
    assert len(hits) == 4  # kept, read up to the cap
    rare = run(
        read(lambda: keyword_search(dialect, scope, ["apple", "pear"], 10, cap=3, drop_common=True))
    )
    # "apple" is held by 3 of the scope's messages: too common to read; "pear" stays.
    assert [h.message_id for h in rare] == [ids[3]]
    assert len(rare) == 1
    assert 0 < rare[0].coverage < 1
    # Common terms are told from the index alone where it can (the whole scope), else
    # from their postings (one conversation): the same decision either way.
    within = run(
        read(
            lambda: keyword_search(
                dialect,
                scope,
                ["apple", "pear"],
                10,
                cap=3,
                drop_common=True,
                conversation_id=conv.id,
            )
        )
    )
    assert within == rare
    kept = run(
        read(lambda: keyword_search(dialect, scope, ["apple", "pear"], 10, cap=4, drop_common=True))
    )
    assert len(kept) == 4  # 3 apples < a cap of 4: read, not dropped


def test_session_and_window_rankings_are_computed_only_when_asked(memory: Memory) -> None:
    from datetime import UTC, datetime

    from memstrata.recall.catchup import CatchUp
    from memstrata.recall.index import keyword_search
    from memstrata.storage.plan import read

    scope = fresh_scope()
    conv = memory.conversations.create(scope)
    when = datetime(2024, 5, 1, 12, 0, tzinfo=UTC)  # one session: said at the same time
    for text in ("apple pie", "what about a pear", "apple tart"):
        memory.messages.append(scope, conv.id, role="user", content=text, occurred_at=when)
    dialect = memory.core.engine.dialect
    run = memory.core.engine.run
    CatchUp(memory.core).keywords()
    terms = ["apple", "pear"]
    full = run(read(lambda: keyword_search(dialect, scope, terms, 10, windows=True)))
    bare = run(read(lambda: keyword_search(dialect, scope, terms, 10, sessions=False)))
    assert list(full) == list(bare)  # the same hits and scores either way
    assert full.sessions == {(conv.id, int(when.timestamp())): 1}
    assert bare.sessions == {}
    assert full.windows is not None
    assert bare.windows is None


def test_the_tier_still_finds_a_fact_when_its_other_words_are_everywhere(mem: Memory) -> None:
    scope = fresh_scope()
    _old_fact(mem, scope)
    mem.core.recall.tier.max_df = 1  # every term seen once is "common": only rarer ones would stay
    conv = mem.conversations.create(scope)
    mem.messages.append(scope, conv.id, role="user", content="Tell me about the weather today")
    ctx = mem.context(scope, conv.id, budget=4000)
    _check_report(ctx)  # whatever the tier finds, the report still adds up


def test_recalled_messages_come_in_time_order_under_their_dates(mem: Memory) -> None:
    scope = fresh_scope()
    conv = mem.conversations.create(scope, title="long ago")
    said = [
        (datetime(2023, 5, 2, tzinfo=UTC), "Ottilie sold one goat in Reykjavik"),
        (datetime(2022, 1, 9, tzinfo=UTC), "Ottilie keeps three goats named after planets"),
        (datetime(2022, 1, 9, 1, tzinfo=UTC), "The goats of Ottilie are named Mars and Venus"),
    ]
    for when, text in said:
        mem.messages.append(scope, conv.id, role="user", content=text, occurred_at=when)
    cid, _ = _today(mem, scope, "What are the goats of Ottilie named after? Planets?")
    ctx = mem.context(scope, cid, budget=4000)
    lines = _recall_block(ctx).splitlines()[1:-1]
    # Oldest first, whatever the ranking; each day's heading once, before its messages.
    assert lines == [
        "[2022-01-09]",
        "user: Ottilie keeps three goats named after planets",
        "user: The goats of Ottilie are named Mars and Venus",
        "[2023-05-02]",
        "user: Ottilie sold one goat in Reykjavik",
    ]
    assert ctx.report.tiers["recall"].items == 3
    _check_report(ctx)
