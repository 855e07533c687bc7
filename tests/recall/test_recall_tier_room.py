"""The recall tier makes items only as far as its room and the few it reports past it."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import UTC, datetime, timedelta

from memstrata import Memory
from memstrata.context.budget import block, heading_cost
from memstrata.context.tiers import TierItem, TierRequest
from memstrata.recall.tier import REPORTED_OVER, in_time_order
from memstrata.testing.conformance import fresh_scope
from memstrata.tokens import Tokenizer
from memstrata.types import Message, Role, Scope, Status
from support import Words

START = datetime(2024, 3, 1, tzinfo=UTC)


TOK = Tokenizer(Words())


def message(i: int, day: int) -> Message:
    when = START + timedelta(days=day)
    return Message(
        f"m{i}",
        "c",
        None,
        Role.USER,
        f"text {i}",
        (),
        (),
        None,
        Status.COMPLETE,
        {},
        when,
        when,
        i + 1,
    )


def request(allowance: int) -> TierRequest:
    return TierRequest(Scope("t", "u"), "c", None, None, "q", allowance, TOK)


def offers(
    costs: list[int], days: list[int], made: list[int]
) -> Iterator[tuple[Message, TierItem]]:
    """Best first; ``made`` records which items were made."""
    for i, (cost, day) in enumerate(zip(costs, days, strict=True)):
        made.append(i)
        m = message(i, day)
        yield m, TierItem(m.id, "w " * cost, cost, {"heading": f"[day {day}]"})


def test_items_that_fit_come_in_time_order_then_the_rest_best_first() -> None:
    made: list[int] = []
    costs, days = [5, 50, 4, 3, 60, 70], [3, 1, 2, 1, 0, 0]
    probe = TierItem("x", "", 0, {"heading": "[day 0]"})
    # Room for items 0, 2 and 3 under their three headings, to the token.
    room = TOK.count_message(block("recall", [])) + 3 * heading_cost(probe, None, TOK) + 12
    out = in_time_order(offers(costs, days, made), request(room), over=None)
    assert made == [0, 1, 2, 3, 4, 5]
    assert [i.id for i in out[:3]] == ["m3", "m2", "m0"]  # by day: 1, 2, 3
    assert [i.id for i in out[3:]] == ["m1", "m4", "m5"]  # best first
    out = in_time_order(offers(costs, days, []), request(room - 1), over=None)
    assert [i.id for i in out[:2]] == ["m2", "m0"], "one token short: item 3 no longer fits"


def test_past_the_reported_few_no_item_is_made() -> None:
    made: list[int] = []
    costs = [2] + [100] * 20 + [1]
    out = in_time_order(offers(costs, [0] * len(costs), made), request(20), over=REPORTED_OVER)
    # The first fits, the next REPORTED_OVER do not: reading stops there, so the small
    # last item is never made (nor offered).
    assert made == list(range(1 + REPORTED_OVER))
    assert [i.id for i in out] == [f"m{i}" for i in range(1 + REPORTED_OVER)]


def test_the_context_reports_a_bounded_few_over_budget(memory: Memory) -> None:
    scope = fresh_scope()
    past = memory.conversations.create(scope, title="the allotment")
    for n in range(40):
        memory.messages.append(
            scope,
            past.id,
            role="user",
            content=f"My allotment bed {n} grows turnips, parsnips and beetroot for the winter",
        )
    now = memory.conversations.create(scope, title="today")
    memory.messages.append(
        scope, now.id, role="user", content="What grows in my allotment beds, turnips or beetroot?"
    )
    ctx = memory.context(scope, now.id, budget=400)
    recall = ctx.report.tiers["recall"]
    over = [d for d in ctx.report.dropped if d["tier"] == "recall" and d["reason"] == "over budget"]
    assert recall.items >= 1, "the tier found the allotment"
    assert 1 <= len(over) <= REPORTED_OVER
    # Every over-budget entry is a candidate ranked after the injected ones' room filled.
    assert len({d["id"] for d in over}) == len(over)
    assert recall.granted <= recall.asked
