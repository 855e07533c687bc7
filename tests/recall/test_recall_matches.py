"""Keyword matches read in one statement (SQLite) agree with one posting list per term
(the path PostgreSQL takes), whatever the scope, the cap and the number of terms."""

from __future__ import annotations

import random
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memstrata import Memory, Scope
from memstrata.config import Settings
from memstrata.recall import index as idx
from memstrata.recall.catchup import CatchUp
from memstrata.recall.scoring import Matches, score_docs
from memstrata.storage.plan import read
from memstrata.testing.conformance import fresh_scope

WORDS = [f"w{i}" for i in range(40)]


def _corpus(mem: Memory, rng: random.Random) -> tuple[Scope, list[str]]:
    scope = fresh_scope()
    agent = Scope(scope.tenant, scope.user, "helper")
    convs = [
        mem.conversations.create(scope).id,
        mem.conversations.create(scope).id,
        mem.conversations.create(agent).id,
    ]
    for n in range(120):
        cid = rng.choice(convs)
        owner = agent if cid == convs[2] else scope
        # Common words are common: w0 is in most messages, w39 in few.
        text = " ".join(w for w in WORDS if rng.random() < 2.0 / (WORDS.index(w) + 2))
        # Some before 1970: a session's second is floored there too.
        at = datetime.fromtimestamp(rng.choice([-86_400.5, 0.25, 1.7e9 + n]), UTC)
        mem.messages.append(owner, cid, role="user", content=text or "w1", occurred_at=at)
    CatchUp(mem.core).keywords()
    return scope, convs


def _by_term(mem: Memory, scope: Scope, terms: list[str], cap: int, drop: bool, cid: str | None):  # type: ignore[no-untyped-def]
    return mem.core.engine.run(
        read(lambda: idx._matches_by_term("sqlite", scope, terms, cap, drop, cid))
    )


def _one_statement(
    mem: Memory, scope: Scope, terms: list[str], cap: int, drop: bool, cid: str | None
):  # type: ignore[no-untyped-def]
    return mem.core.engine.run(read(lambda: idx._sqlite_matches(scope, terms, cap, drop, cid)))


@pytest.fixture
def sqlite(tmp_path: Path):  # type: ignore[no-untyped-def]
    # The one-statement read is SQLite's own: PostgreSQL takes the other path.
    mem = Memory.open(
        f"sqlite:///{tmp_path / 'm.db'}", settings=Settings(home=tmp_path, worker="off")
    )
    yield mem
    mem.close()


def _same(a: Matches, b: Matches) -> None:
    assert a.df == b.df
    assert sorted(a.docs) == sorted(b.docs)
    assert score_docs(a) == score_docs(b)


def test_one_statement_agrees_with_a_posting_list_per_term(sqlite: Memory) -> None:
    memory = sqlite
    rng = random.Random(7)
    scope, convs = _corpus(memory, rng)
    agent = Scope(scope.tenant, scope.user, "helper")
    for _ in range(25):
        terms = rng.sample(WORDS, rng.randint(1, 12))
        cap = rng.choice([3, 20, 200])
        drop = rng.random() < 0.5
        for who, cid in ((scope, None), (scope, convs[0]), (agent, None), (agent, convs[2])):
            _same(
                _one_statement(memory, who, terms, cap, drop, cid),
                _by_term(memory, who, terms, cap, drop, cid),
            )


def test_more_terms_than_one_statement_holds(sqlite: Memory, monkeypatch) -> None:  # type: ignore[no-untyped-def]
    memory = sqlite
    scope, _ = _corpus(memory, random.Random(3))
    monkeypatch.setattr(idx, "_TERMS_PER_STATEMENT", 7)  # 40 terms: six statements
    for drop in (False, True):
        many = _one_statement(memory, scope, WORDS, 30, drop, None)
        _same(many, _by_term(memory, scope, WORDS, 30, drop, None))
        # the common ones are unread when dropped, and only then
        assert (None in many.df) is drop
