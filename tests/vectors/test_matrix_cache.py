"""Exact search's in-memory matrices: a cached index answers exactly what an uncached one
does, through additions, replacements, deletions (by conversation, message and user, from
this handle or another) and every filter; and it reads only what changed.

On SQLite and on PostgreSQL (the exact fallback). Two handles on one store stand for two
processes: each has its own cache, and only the owner versions in the store tie them.
"""

from __future__ import annotations

import random
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import numpy as np
import pytest

from memstrata import Memory
from memstrata.config import Settings
from memstrata.storage.plan import Query, read, write
from memstrata.testing import FakeEmbedder
from memstrata.types import Scope
from memstrata.vectors import Space, VectorHit, VectorItem, open_vector_index
from memstrata.vectors.exact import ExactIndex
from memstrata.vectors.matrices import MatrixCache
from memstrata.vectors.port import delete_for_conversations, delete_for_messages, delete_for_user
from support import POSTGRES_URL, memory_on_postgres, postgres_schema

SPACE = Space("cache-test:16", 16)
OWNERS = [Scope("acme", "alice"), Scope("acme", "alice", "helper"), Scope("acme", "bob")]


@dataclass
class Pair:
    """Two handles on one store: ``a`` caches, ``b`` is another process writing."""

    a: Memory
    b: Memory

    def index(self, mem: Memory, cache_bytes: int = 64 * 2**20) -> ExactIndex:
        index = open_vector_index(mem.core.engine, SPACE, prefer="exact", cache_bytes=cache_bytes)
        assert isinstance(index, ExactIndex)
        return index


@pytest.fixture(params=["sqlite", "postgres"])
def pair(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Pair]:
    if request.param == "sqlite":
        url = f"sqlite:///{(tmp_path / 'm.db').as_posix()}"
        settings = Settings(home=tmp_path, worker="off")
        a, b = Memory.open(url, settings=settings), Memory.open(url, settings=settings)
        try:
            yield Pair(a, b)
        finally:
            a.close()
            b.close()
        return
    with postgres_schema() as schema:
        a = memory_on_postgres(POSTGRES_URL, schema, tmp_path)
        b = memory_on_postgres(POSTGRES_URL, schema, tmp_path / "b")
        try:
            yield Pair(a, b)
        finally:
            a.close()
            b.close()


def _same(got: list[VectorHit], want: list[VectorHit]) -> None:
    assert [h.id for h in got] == [h.id for h in want]
    assert [(h.message_id, h.conversation_id) for h in got] == [
        (h.message_id, h.conversation_id) for h in want
    ]
    assert np.allclose([h.score for h in got], [h.score for h in want], atol=1e-6)


def test_a_cached_index_answers_like_an_uncached_one(pair: Pair) -> None:
    """Random adds, replacements and deletes through either handle; after each step every
    filter (agent, conversation, excluded ids) gives the same hits with and without the
    cache, and the same as a fresh read."""
    rnd = random.Random(5)
    cached = pair.index(pair.a)
    writer = pair.index(pair.b)
    plain = pair.index(pair.a, cache_bytes=0)
    live: dict[str, tuple[Scope, str, str]] = {}
    n = 0

    def vec() -> list[float]:
        return [rnd.gauss(0, 1) for _ in range(SPACE.dim)]

    for step in range(40):
        action = rnd.random()
        target = cached if rnd.random() < 0.5 else writer
        if action < 0.5 or not live:  # add a few (sometimes replacing one)
            items: list[VectorItem] = []
            for _ in range(rnd.randint(1, 6)):
                if live and rnd.random() < 0.2:
                    vid = rnd.choice(sorted(live))
                    scope, conv, mid = live[vid]
                else:
                    n += 1
                    scope, conv, mid = rnd.choice(OWNERS), f"c{rnd.randint(1, 4)}", f"m{n}"
                    vid = f"{conv}/{mid}"
                if vid not in {i.id for i in items}:
                    items.append(VectorItem(vid, scope, conv, mid, vec()))
                    live[vid] = (scope, conv, mid)
            target.add(items)
        elif action < 0.7:
            conv = f"c{rnd.randint(1, 4)}"
            target.engine.run(write(lambda conv=conv: delete_for_conversations([conv])))  # type: ignore[misc]
            live = {k: v for k, v in live.items() if v[1] != conv}
        elif action < 0.9:
            vid = rnd.choice(sorted(live))
            _, conv, mid = live.pop(vid)
            target.engine.run(write(lambda c=conv, m=mid: delete_for_messages(c, [m])))  # type: ignore[misc]
        else:
            target.engine.run(write(lambda: delete_for_user("acme", "bob")))
            live = {k: v for k, v in live.items() if v[0].user != "bob"}
        q = vec()
        for scope in OWNERS:
            excluded = [live[v][2] for v in rnd.sample(sorted(live), min(2, len(live)))]
            for kw in ({}, {"conversation_id": "c2"}, {"exclude_message_ids": excluded}):
                want = plain.search(scope, q, 50, **kw)
                _same(cached.search(scope, q, 50, **kw), want)
                _same(writer.search(scope, q, 50, **kw), want)
        expected = {v for v, (s, _, _) in live.items() if s.user == "alice"}
        everything = cached.search(Scope("acme", "alice"), q, 1000)
        assert {h.id for h in everything} == expected, f"step {step}"


def _reads(index: ExactIndex, scope: Scope, q: list[float]) -> list[str]:
    """The SQL a search of ``scope`` runs (to see what it reads)."""
    seen: list[str] = []
    op = index.search_op(scope, q, 5)
    result: Any = None
    engine = index.engine

    def replay() -> Any:
        nonlocal result
        request = op.send(None)
        while True:
            if isinstance(request, Query):
                seen.append(request.sql)
            answer = yield request
            try:
                request = op.send(answer)
            except StopIteration as stop:
                result = stop.value
                return result

    engine.run(read(replay))
    return seen


def test_an_unchanged_owner_costs_one_row_and_additions_read_only_themselves(pair: Pair) -> None:
    index = pair.index(pair.a)
    alice = Scope("acme", "alice")
    q = [1.0] * SPACE.dim
    index.add([VectorItem(f"v{i}", alice, "c1", f"m{i}", np.eye(16)[i]) for i in range(10)])
    assert any("FROM vectors" in sql for sql in _reads(index, alice, q))  # the first load
    unchanged = _reads(index, alice, q)
    assert len(unchanged) == 1
    assert "vector_owners" in unchanged[0]
    before = index.cache.get(("acme", "alice"))
    assert before is not None
    pair.index(pair.b).add([VectorItem("v10", alice, "c1", "m10", np.eye(16)[10])])
    added = _reads(index, alice, q)
    assert len(added) == 2
    assert "version > ?" in added[1]
    after = index.cache.get(("acme", "alice"))
    assert after is not None
    assert after.n == 11
    assert after.shared is before.shared  # appended in place: no copy of the ten
    assert before.n == 10  # an earlier entry still sees its own rows only


def test_a_deleted_user_is_forgotten_and_a_new_one_never_mistaken_for_them(
    pair: Pair,
) -> None:
    """Deleting the user drops the handle's matrix at once; a user of the same name made
    again (versions start over) is read afresh by another handle, never served stale."""
    alice = Scope("acme", "alice")
    pair.a.conversations.create(alice)  # the user exists
    first = pair.a.core.recall
    pair.a.core.recall.use(FakeEmbedder(16))
    pair.b.core.recall.use(FakeEmbedder(16))
    index_a = first.vector_index()
    assert isinstance(index_a, ExactIndex)
    index_a.add([VectorItem("old", alice, "c1", "m-old", np.eye(16)[0])])
    assert [h.id for h in index_a.search(alice, np.eye(16)[0], 5)] == ["old"]
    other = pair.b.core.recall.vector_index()
    assert isinstance(other, ExactIndex)
    assert [h.id for h in other.search(alice, np.eye(16)[0], 5)] == ["old"]  # b caches too
    pair.a.users.delete(alice)
    assert index_a.cache.get(("acme", "alice")) is None
    # Versions start over: 1, then 2 (above the version b holds, with no deletion since
    # the new row began): only the epoch tells b that its matrix is another user's.
    index_a.add([VectorItem("new", alice, "c9", "m-new", np.eye(16)[1])])
    index_a.add([VectorItem("newer", alice, "c9", "m-newer", np.eye(16)[2])])
    assert {h.id for h in other.search(alice, np.eye(16)[0], 5)} == {"new", "newer"}


def test_the_cache_keeps_to_its_budget() -> None:
    dim = 4
    rows = [(f"v{i}", f"m{i}", "c", "", np.ones(dim, "<f4").tobytes()) for i in range(40)]
    one = MatrixCache(dim, max_bytes=1 << 20).load(("t", "u"), ("e", 1, 0), rows).nbytes
    cache = MatrixCache(dim, max_bytes=one * 3 // 2)  # room for one such matrix, not two
    first = cache.load(("t", "u1"), ("e", 1, 0), rows)
    assert cache.get(("t", "u1")) is first
    cache.load(("t", "u2"), ("e", 1, 0), rows)  # both do not fit: the older goes
    assert cache.get(("t", "u1")) is None
    assert cache.get(("t", "u2")) is not None
    big = [(f"v{i}", f"m{i}", "c", "", np.ones(dim, "<f4").tobytes()) for i in range(500)]
    used = cache.load(("t", "u3"), ("e", 1, 0), big)  # larger than the budget: not kept
    assert used.n == 500
    assert cache.get(("t", "u3")) is None
    assert cache.stats()["bytes"] <= one * 3 // 2


def test_rows_names_each_picked_row_as_row_does() -> None:
    dim = 2
    vec = np.ones(dim, "<f4").tobytes()
    rows = [(f"v{i}", f"m{i}", f"c{i % 3}", "", vec) for i in range(10)]
    entry = MatrixCache(dim, max_bytes=1 << 20).load(("t", "u"), ("e", 1, 0), rows)
    picked = [7, 0, 4, 4, 9]
    assert entry.rows(picked) == [entry.row(i) for i in picked]
    assert entry.rows([]) == []


def test_two_extensions_of_one_entry_do_not_share_rows() -> None:
    """Two searches extending the same entry at once (different new rows): the second
    copies instead of writing over rows the first published."""
    dim = 2
    cache = MatrixCache(dim, max_bytes=1 << 20)
    vec = np.ones(dim, "<f4").tobytes()
    base = cache.load(("t", "u"), ("e", 1, 0), [("a", "ma", "c", "", vec)])
    one = cache.extend(("t", "u"), base, ("e", 2, 0), [("b", "mb", "c", "", vec)])
    two = cache.extend(("t", "u"), base, ("e", 2, 0), [("x", "mx", "c", "", vec)])
    assert [one.row(i)[0] for i in range(one.n)] == ["a", "b"]
    assert [two.row(i)[0] for i in range(two.n)] == ["a", "x"]
    assert one.shared is not two.shared


def test_a_user_too_large_for_the_cache_is_read_directly_until_it_changes(pair: Pair) -> None:
    """A matrix that does not fit is built once; while the owner's stamp stays, searches
    read the scope's rows as without a cache (no matrix built again), with the same hits."""
    index = pair.index(pair.a, cache_bytes=1)
    plain = pair.index(pair.a, cache_bytes=0)
    alice = Scope("acme", "alice")
    q = [1.0] * SPACE.dim
    index.add([VectorItem(f"v{i}", alice, "c1", f"m{i}", np.eye(16)[i]) for i in range(10)])
    first = _reads(index, alice, q)
    assert any("version <= ?" in sql for sql in first)  # built (and not kept)
    again = _reads(index, alice, q)
    assert len(again) == 2
    assert "vector_owners" in again[0]
    assert "version" not in again[1]  # the direct read of the scope's rows
    _same(index.search(alice, q, 5), plain.search(alice, q, 5))
    index.add([VectorItem("v10", alice, "c1", "m10", np.eye(16)[10])])  # a new stamp
    assert any("version <= ?" in sql for sql in _reads(index, alice, q))
