"""Recall hardening (issue 21): no cross-tenant term oracle (finding 3), no budget that
fails on an exclusion limit (finding 8), bounded work per search (finding 9)."""

from __future__ import annotations

from collections.abc import Callable, Generator, Iterator
from pathlib import Path
from typing import Any

import pytest

from memstrata import Memory, Scope
from memstrata import conversation as conv_ops
from memstrata.errors import InvalidInput
from memstrata.recall import index as idx
from memstrata.recall.catchup import CatchUp
from memstrata.recall.service import MAX_RESULT, RecallEngine, search_op
from memstrata.storage.plan import Op, read, write
from memstrata.testing import FakeEmbedder
from memstrata.testing.conformance import fresh_scope
from memstrata.types import NewMessage, Role
from support import open_memory


@pytest.fixture
def mem(memory: Memory) -> Memory:
    memory.core.recall.use(FakeEmbedder(64))
    memory.core.context.auto_compact = False
    return memory


@pytest.fixture(
    params=[
        pytest.param("sqlite-file", marks=pytest.mark.xdist_group("sqlite-file")),
        pytest.param("postgres", marks=pytest.mark.xdist_group("postgres")),
    ]
)
def big(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    """One store per SQL dialect, for tests that write 10k+ messages."""
    for m in open_memory(request.param, tmp_path):
        m.core.recall.use(FakeEmbedder(64))
        m.core.context.auto_compact = False
        yield m


def _bulk(mem: Memory, scope: Scope, cid: str, texts: list[str]) -> None:
    """Append many messages in one transaction (the public append op, not a shortcut)."""
    rt = mem.core.rt

    def op() -> Op[None]:
        for text in texts:
            yield from conv_ops.append_message(
                rt, scope, cid, NewMessage(role=Role.USER, content=text)
            )

    mem.core.engine.run(write(op))


def _view(mem: Memory, scope: Scope, cid: str, query: str) -> dict[str, Any]:
    """Everything ranking decides for ``scope``: search hits with scores, and the context."""
    hits = mem.recall.search(scope, query, k=20)
    ctx = mem.context(scope, cid, budget=3000, query=query).to_dict()
    # How much repeats the previous context is not ranking's: asked again, it is all of it.
    ctx["report"].pop("cache")
    return {"hits": [(h.message.id, h.score) for h in hits], "context": ctx}


def test_another_tenant_planting_a_word_changes_nothing_for_me(mem: Memory) -> None:
    """Finding 3: tenant A plants 499, then 500, then 700 messages with a word; tenant B's
    items, order and scores stay exactly the same (term statistics are B's own)."""
    b = fresh_scope()
    conv = mem.conversations.create(b)
    _bulk(
        mem,
        b,
        conv.id,
        [
            "the zebra password is orchid",
            "my zebra crossing story from the city",
            "orchid care: water weekly and keep warm",
            "a long note about zebra stripes, savanna grass and the orchid house at the zoo",
            "nothing to see here, just the weather",
        ],
    )
    asking = mem.conversations.create(b)
    mem.messages.append(b, asking.id, role="user", content="what was the zebra password?")
    before = _view(mem, b, asking.id, "zebra orchid password")
    assert before["hits"]
    a = fresh_scope()
    planted = mem.conversations.create(a)
    for total in (499, 500, 700):
        have = mem.conversations.get(a, planted.id).message_count
        _bulk(mem, a, planted.id, [f"zebra zebra orchid {i}" for i in range(total - have)])
        assert _view(mem, b, asking.id, "zebra orchid password") == before


def test_a_huge_budget_never_fails_on_an_exclusion_limit(big: Memory) -> None:
    """Finding 8: a budget larger than the whole of a >10,000-message conversation puts
    every message in the window; the recall tier leaves them out by range, not by id
    (SQLite and PostgreSQL: the tier's code is the same on every backend)."""
    mem = big
    scope = fresh_scope()
    conv = mem.conversations.create(scope)
    _bulk(mem, scope, conv.id, [f"fox budget note {i}" for i in range(10_050)])
    mem.messages.append(scope, conv.id, role="user", content="what about the fox budget?")
    other = mem.conversations.create(scope)
    mem.messages.append(scope, other.id, role="user", content="the fox budget was approved")
    ctx = mem.context(scope, conv.id, budget=10_000_000)
    assert ctx.report.tiers["recent"].items == 10_051
    assert not ctx.report.over_budget
    recalled = [m for m in ctx.messages if m["content"].startswith("<recalled-messages>")]
    for block in recalled:
        assert "fox budget note" not in block["content"]  # the window is never repeated


def _counting(make: Callable[[], Op[Any]], box: list[int]) -> Callable[[], Op[Any]]:
    def op() -> Generator[Any, Any, Any]:
        gen = make()
        try:
            request = next(gen)
            while True:
                box[0] += 1
                request = gen.send((yield request))
        except StopIteration as stop:
            return stop.value

    return op


def test_search_work_is_bounded_and_neighbours_are_batched(mem: Memory) -> None:
    """Finding 9: neighbours are fetched in one query per step (never per hit), and at
    most MAX_RESULT messages come back however large k and message_range are."""
    scope = fresh_scope()
    conv = mem.conversations.create(scope)
    _bulk(mem, scope, conv.id, [f"fox {i} budget" if i % 3 == 0 else f"x {i}" for i in range(3000)])
    engine, dialect = mem.core.engine, mem.core.engine.dialect
    info = RecallEngine.analyse("fox budget")

    def search(k: int, message_range: int) -> tuple[int, int]:
        box = [0]
        hits = engine.run(
            read(
                _counting(
                    lambda: search_op(
                        dialect,
                        None,
                        scope,
                        info,
                        None,
                        k=k,
                        conversation_id=None,
                        leaf_id=None,
                        message_range=message_range,
                        excluded=frozenset(),
                        params=mem.core.recall.params,
                    ),
                    box,
                )
            )
        )
        return box[0], len(hits)

    few_queries, _ = search(5, 20)
    many_queries, returned = search(200, 20)
    assert many_queries <= few_queries + 2  # not one round of queries per hit
    assert returned <= MAX_RESULT
    queries, returned = search(200, 3)
    assert returned > 200  # neighbours of every hit fit the budget at this range
    assert queries <= few_queries
    # The public limits: 422 over REST, InvalidInput here.
    with pytest.raises(InvalidInput):
        mem.recall.search(scope, "fox", k=201)
    with pytest.raises(InvalidInput):
        mem.recall.search(scope, "fox", message_range=21)
    with pytest.raises(InvalidInput):
        mem.recall.search(scope, "fox " * 2501)


def test_the_term_cap_bounds_what_one_term_reads(mem: Memory) -> None:
    scope = fresh_scope()
    conv = mem.conversations.create(scope)
    _bulk(mem, scope, conv.id, [f"fox {i}" for i in range(50)])
    CatchUp(mem.core).keywords()  # what a search does first (full-text rows batched)
    dialect = mem.core.engine.dialect
    rows = mem.core.engine.run(read(lambda: idx.term_postings(dialect, scope, "fox", 20)))
    assert len(rows) == 20
