"""The budget arithmetic of context assembly, without a database.

Counts are in a one-token-per-word encoding, so each expectation can be checked by hand:
an empty block (``<tag>`` and ``</tag>``) costs 2 words + 4 message overhead = 6, and each
item ``"w w"`` adds 2.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import pytest

from memstrata.context.budget import Budget, block
from memstrata.context.summaries import Summary
from memstrata.context.tiers import TierItem, TierPolicy
from memstrata.errors import InvalidInput
from memstrata.tokens import Tokenizer
from memstrata.types import Message, Role, Status
from support import Words

NOW = datetime(2026, 1, 1, tzinfo=UTC)


TOK = Tokenizer(Words())
EMPTY_BLOCK = 6


def item(id: str, **provenance: Any) -> TierItem:
    return TierItem(id, "w w", 2, provenance)


def message(depth: int, branch_tokens: int, token_count: int = 10) -> Message:
    return Message(
        f"m{depth}",
        "c",
        None if depth == 0 else f"m{depth - 1}",
        Role.USER if depth % 2 == 0 else Role.ASSISTANT,
        "text",
        (),
        (),
        None,
        Status.COMPLETE,
        {},
        NOW,
        NOW,
        depth + 1,
        depth,
        token_count,
        branch_tokens,
    )


def summary(up_to_depth: int, up_to_branch_tokens: int) -> Summary:
    return Summary(
        "s1", "c", f"m{up_to_depth}", up_to_depth, up_to_branch_tokens, 1, None, "sum", "x", NOW
    )


def test_block_wraps_items_in_the_tier_tag() -> None:
    assert block("facts", [item("a")]) == "<memory>\nw w\n</memory>"
    assert TOK.count_message(block("facts", [])) == EMPTY_BLOCK


def test_open_merges_policies_in_priority_order() -> None:
    books = Budget.open(100, TOK, {"plan": TierPolicy(-1, cap=50)}, "m3")
    assert books.order[0] == "plan"
    assert books.order[1] == "recent"
    assert books.policies["plan"].cap == 50
    assert books.policies["facts"].minimum == 500  # the defaults stay
    assert set(books.tiers) == {"system", *books.order}
    assert (books.report.budget, books.report.encoding, books.report.leaf_id) == (
        100,
        "words",
        "m3",
    )


def test_a_policy_with_minimum_over_cap_is_refused() -> None:
    with pytest.raises(InvalidInput):
        Budget.open(100, TOK, {"plan": TierPolicy(1, minimum=10, cap=5)}, None)


def test_asks_count_the_whole_block_without_rejected_items() -> None:
    books = Budget.open(100, TOK, {}, None)
    books.note_asks({"facts": [item("a"), item("b"), item("r", rejected="too far")]})
    assert books.tiers["facts"].asked == EMPTY_BLOCK + 4


def test_a_tier_without_a_policy_goes_last() -> None:
    books = Budget.open(100, TOK, {}, None)
    del books.policies["plan"]
    books.order.remove("plan")
    books.note_asks({"plan": [item("a")]})
    assert books.order[-1] == "plan"
    assert books.policies["plan"].priority == len(books.policies) - 1
    assert books.tiers["plan"].asked == EMPTY_BLOCK + 2


def test_window_keeps_what_the_tiers_below_it_reserve() -> None:
    # The window ranks first: facts (minimum 500, asking 10) hold what they ask;
    # the summary (no minimum) holds nothing.
    books = Budget.open(100, TOK, {}, None)
    offered = {"facts": [item("a"), item("b")], "summary": [item("s")]}
    books.note_asks(offered)
    books.hold(offered, late=[])
    assert books.reserve["facts"] == EMPTY_BLOCK + 4
    assert books.reserve["summary"] == 0
    assert books.window_limit(system_tokens=5) == 100 - (EMPTY_BLOCK + 4)


def test_a_tier_above_the_window_holds_all_it_asks_up_to_its_cap() -> None:
    books = Budget.open(100, TOK, {"summary": TierPolicy(-1, cap=7)}, None)
    offered = {"summary": [item("s")]}
    books.note_asks(offered)
    books.hold(offered, late=[])
    assert books.reserve["summary"] == 7
    assert books.window_limit(system_tokens=0) == 93


def test_the_window_cap_bounds_it_and_the_system_run_is_always_kept() -> None:
    books = Budget.open(100, TOK, {"recent": TierPolicy(0, cap=30)}, None)
    books.hold({}, late=[])
    assert books.window_limit(system_tokens=5) == 35
    # A system run over the whole budget leaves the window nothing, never less.
    assert books.window_limit(system_tokens=500) == 500


def test_late_tiers_hold_their_minimum_or_their_cap_above_the_window() -> None:
    books = Budget.open(
        100,
        TOK,
        {"recall": TierPolicy(20, minimum=7), "late": TierPolicy(-1, minimum=3, cap=20)},
        None,
    )
    books.hold({}, late=["recall", "late", "unknown"])
    assert books.reserve["recall"] == 7
    assert books.reserve["late"] == 20
    assert "unknown" not in books.reserve


def test_grant_takes_whole_items_within_the_cap() -> None:
    books = Budget.open(100, TOK, {"facts": TierPolicy(1, cap=EMPTY_BLOCK + 4)}, None)
    offered = {"facts": [item("a"), item("b"), item("c")]}
    books.note_asks(offered)
    books.hold(offered, late=[])
    chosen = books.grant(offered)
    assert [i.id for i in chosen["facts"]] == ["a", "b"]
    assert books.tiers["facts"].granted == EMPTY_BLOCK + 4
    assert books.tiers["facts"].items == 2
    assert books.report.dropped == [
        {"tier": "facts", "id": "c", "tokens": 2, "reason": "over budget", "provenance": {}}
    ]


def test_grant_skips_items_already_carried() -> None:
    # A profile line drawn from an injected fact is carried by it.
    books = Budget.open(3000, TOK, {}, None)
    offered = {"facts": [item("f1")], "profile": [item("p1", covered_by=["f1"]), item("p2")]}
    books.note_asks(offered)
    books.hold(offered, late=[])
    chosen = books.grant(offered)
    assert [i.id for i in chosen["profile"]] == ["p2"]
    assert books.report.dropped[0]["id"] == "p1"
    assert books.report.dropped[0]["reason"] == "carried by an injected fact"


def test_facts_and_profile_share_the_memory_group_cap() -> None:
    def big(id: str, words: int) -> TierItem:
        return TierItem(id, " ".join(["w"] * words), words)

    books = Budget.open(10_000, TOK, {}, None)
    offered = {"facts": [big("f", 1500)], "profile": [big("p1", 400), big("p2", 400)]}
    books.note_asks(offered)
    books.hold(offered, late=[])
    chosen = books.grant(offered)
    # The profile is served first: its 806 leave 1194 of the group, too few for the fact.
    assert [i.id for i in chosen["profile"]] == ["p1", "p2"]
    assert books.tiers["profile"].granted == EMPTY_BLOCK + 800
    assert "facts" not in chosen
    assert books.tiers["profile"].granted + books.tiers["facts"].granted <= 2000


def test_the_profile_comes_first_in_the_memory_group_but_facts_keep_their_share() -> None:
    def big(id: str, words: int) -> TierItem:
        return TierItem(id, " ".join(["w"] * words), words)

    facts = [big(f"f{n}", 150) for n in range(10)]
    # A modest profile is served whole; the facts take what it leaves.
    books = Budget.open(10_000, TOK, {}, None)
    offered = {"facts": facts, "profile": [big("p1", 700), big("p2", 700)]}
    books.note_asks(offered)
    books.hold(offered, late=[])
    chosen = books.grant(offered)
    assert [i.id for i in chosen["profile"]] == ["p1", "p2"]
    assert [i.id for i in chosen["facts"]] == ["f0", "f1", "f2"]  # 456 of the 594 left
    # A profile asking for the whole group still leaves the facts their minimum (500).
    books = Budget.open(10_000, TOK, {}, None)
    offered = {"facts": facts, "profile": [big(f"p{n}", 600) for n in range(4)]}
    books.note_asks(offered)
    books.hold(offered, late=[])
    chosen = books.grant(offered)
    assert books.tiers["facts"].granted == EMPTY_BLOCK + 450
    assert [i.id for i in chosen["profile"]] == ["p0", "p1"]  # 1206 of the 1544 left
    assert books.tiers["profile"].granted + books.tiers["facts"].granted <= 2000
    # The share moves with the facts' policy (as docs/seed-semantics.md shows).
    books = Budget.open(10_000, TOK, {"facts": TierPolicy(2, 300, 2000, "memory")}, None)
    books.note_asks(offered)
    books.hold(offered, late=[])
    chosen = books.grant(offered)
    assert [i.id for i in chosen["facts"]] == ["f0"]  # 156 of the 300 held for them
    assert [i.id for i in chosen["profile"]] == ["p0", "p1", "p2"]


def test_a_tier_with_only_rejected_items_says_why() -> None:
    books = Budget.open(100, TOK, {}, None)
    offered = {"recall": [item("r", rejected="below relevance floor")]}
    books.note_asks(offered)
    books.hold(offered, late=[])
    assert books.grant(offered) == {}
    assert books.tiers["recall"].reason == "below relevance floor"


def test_the_window_books_what_it_leaves_out_of_the_branch() -> None:
    books = Budget.open(50, TOK, {}, "m9")
    leaf = message(9, branch_tokens=100)
    window = [message(d, branch_tokens=10 * (d + 1)) for d in range(6, 10)]
    books.record_window(leaf, [], 0, window, used=40, over=False, summary=None)
    assert (books.tiers["recent"].granted, books.tiers["recent"].asked) == (40, 100)
    assert books.remaining == 10
    assert books.report.dropped == [
        {
            "tier": "recent",
            "reason": "over budget",
            "range": {"from_depth": 0, "to_depth": 5, "to_id": "m5"},
            "messages": 6,
            "tokens": 60,
        }
    ]


def test_a_summary_covers_the_start_of_the_branch() -> None:
    books = Budget.open(50, TOK, {}, "m9")
    leaf = message(9, branch_tokens=100)
    window = [message(d, branch_tokens=10 * (d + 1)) for d in range(6, 10)]
    books.record_window(leaf, [], 0, window, used=40, over=False, summary=summary(5, 60))
    assert books.tiers["recent"].asked == 40
    assert books.report.dropped == []
    books.note_summary(summary(5, 60), used=True)
    assert (books.report.summary_id, books.report.covered_up_to) == ("s1", "m5")


def test_a_summary_that_did_not_fit_drops_what_it_covers() -> None:
    books = Budget.open(50, TOK, {}, "m9")
    books.note_summary(summary(5, 60), used=False)
    assert books.report.summary_id is None
    assert books.report.dropped == [
        {
            "tier": "summary",
            "reason": "covered by a summary that did not fit the budget",
            "range": {"to_id": "m5", "to_depth": 5},
            "tokens": 60,
        }
    ]


def test_close_totals_the_grants() -> None:
    books = Budget.open(30, TOK, {}, "m9")
    leaf = message(9, branch_tokens=100)
    books.record_window(leaf, [], 0, [leaf], used=10, over=False, summary=None)
    offered = {"facts": [item("a")]}
    books.note_asks(offered)
    books.grant(offered)
    books.close()
    assert books.report.total == 10 + EMPTY_BLOCK + 2
    assert not books.report.over_budget
    books.record_window(leaf, [], 0, [leaf], used=40, over=True, summary=None)
    books.close()
    report = books.report  # close() updated it since the check above
    assert report.over_budget
    assert report.newest_turn_over_budget


@pytest.mark.parametrize(
    ("branch_tokens", "depth", "covered", "due"),
    [
        (1000, 30, None, True),  # 1000 > 0.8 * 1000 and 31 messages > 20
        (800, 30, None, False),  # not past the threshold
        (1000, 15, None, False),  # not longer than the window
        (1000, 30, summary(20, 500), False),  # the summary covers the first 500
    ],
)
def test_compaction_is_due_past_the_threshold_and_the_window(
    branch_tokens: int, depth: int, covered: Summary | None, due: bool
) -> None:
    books = Budget.open(1000, TOK, {}, "leaf")
    leaf = message(depth, branch_tokens)
    assert books.compaction_due(leaf, covered, 0.8, 20, model_window=128_000) is due
    # The smaller of the model's window and the budget sets the threshold.
    assert books.compaction_due(leaf, None, 0.8, 20, model_window=100) is (depth + 1 > 20)


def test_items_with_a_heading_are_listed_under_it_once_per_run() -> None:
    items = [
        item("a", heading="[d1]"),
        item("b", heading="[d1]"),
        item("c", heading="[d2]"),
        item("d"),
    ]
    assert block("recall", items) == (
        "<recalled-messages>\n[d1]\nw w\nw w\n[d2]\nw w\nw w\n</recalled-messages>"
    )
    # Whatever subset is granted, every item stays under its own heading.
    assert block("recall", [items[1], items[2]]) == (
        "<recalled-messages>\n[d1]\nw w\n[d2]\nw w\n</recalled-messages>"
    )


def test_a_heading_costs_once_per_run_when_granting() -> None:
    # Block 6 + heading 1 + 2 + 2 = 11: both items of one day fit, a third day's item
    # would need its heading too.
    books = Budget.open(100, TOK, {"recall": TierPolicy(1, cap=EMPTY_BLOCK + 6)}, None)
    offered = {
        "recall": [
            item("a", heading="[d1]"),
            item("b", heading="[d1]"),
            item("c", heading="[d2]"),
        ]
    }
    books.note_asks(offered)
    books.hold(offered, late=[])
    chosen = books.grant(offered)
    assert [i.id for i in chosen["recall"]] == ["a", "b"]
    assert books.tiers["recall"].granted == EMPTY_BLOCK + 5
    assert books.tiers["recall"].granted == TOK.count_message(block("recall", chosen["recall"]))
    assert [d["id"] for d in books.report.dropped] == ["c"]
