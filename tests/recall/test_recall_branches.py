"""Branch-aware recall: within the conversation being answered, recall returns only
ancestors of the leaf (never answers regenerated away, questions edited away or what is
under them) unless the caller asks for other branches. Over REST, on SQLite and
PostgreSQL; the ancestry labels themselves are checked against a naive walk."""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Iterator
from dataclasses import dataclass
from functools import partial
from pathlib import Path
from typing import Any

import httpx
import pytest

from memstrata import AsyncMemory, Memory, Message, Scope
from memstrata.config import Settings
from memstrata.conversation.branches import branch_of, labels_of
from memstrata.server import create_app
from memstrata.storage.plan import read
from memstrata.testing import FakeEmbedder
from memstrata.testing.conformance import fresh_scope
from support import postgres_schema, postgres_url_for

pytestmark = pytest.mark.anyio

ALICE = Scope("t1", "alice")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture(
    params=[
        pytest.param("sqlite", marks=pytest.mark.xdist_group("sqlite-file")),
        pytest.param("postgres", marks=pytest.mark.xdist_group("postgres")),
    ]
)
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{(tmp_path / 'rest.db').as_posix()}"
        return
    with postgres_schema() as schema:
        yield postgres_url_for(schema)


@dataclass
class Rest:
    client: httpx.AsyncClient
    headers: dict[str, str]
    mem: Memory  # a second handle on the same store, for setting up the tree

    async def search(self, **body: Any) -> list[dict[str, Any]]:
        r = await self.client.post("/v1/recall/search", json=body, headers=self.headers)
        assert r.status_code == 200, r.text
        hits: list[dict[str, Any]] = r.json()["hits"]
        return hits

    async def context(self, cid: str, **body: Any) -> str:
        r = await self.client.post(
            f"/v1/conversations/{cid}/context", json=body, headers=self.headers
        )
        assert r.status_code == 200, r.text
        return r.text


@pytest.fixture
async def rest(db_url: str, tmp_path: Path) -> AsyncIterator[Rest]:
    settings = Settings(db=db_url, home=tmp_path, worker="off")
    amem = AsyncMemory.open(db_url, settings=settings)
    mem = Memory.open(db_url, settings=settings)
    for m in (amem.core, mem.core):
        m.recall.use(FakeEmbedder(64))
        m.context.auto_compact = False
    key = mem.keys.create("t1", user="alice")[1]
    transport = httpx.ASGITransport(app=create_app(amem, settings), raise_app_exceptions=False)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://memstrata.test") as c:
            yield Rest(c, {"Authorization": f"Bearer {key}"}, mem)
    finally:
        mem.close()
        amem.core.close()


def _ids(hits: list[dict[str, Any]]) -> set[str]:
    return {h["message"]["id"] for h in hits}


def _regenerated(mem: Memory, question: str, first: str, second: str) -> list[Message]:
    """A conversation holding a question answered, then the answer regenerated: [the
    question, the first answer (now off the active branch), the second]."""
    conv = mem.conversations.create(ALICE)
    q = mem.messages.append(ALICE, conv.id, role="user", content=question)
    answers = [
        mem.messages.append(ALICE, conv.id, role="assistant", content=text, parent_id=q.id)
        for text in (first, second)
    ]
    return [q, *answers]


async def test_a_regenerated_answer_never_comes_back_on_the_new_branch(rest: Rest) -> None:
    mem = rest.mem
    q, rejected, kept = _regenerated(
        mem,
        "What is the capital of Australia?",
        "The capital is Sydney, the harbour city.",
        "The capital is Canberra.",
    )
    conv = mem.conversations.get(ALICE, q.conversation_id)
    follow = mem.messages.append(
        ALICE,
        conv.id,
        role="user",
        content="Tell me about the harbour city Sydney capital",
        parent_id=kept.id,
    )
    # Without a leaf the conversation's active branch decides; asked for, it comes back.
    assert rejected.id not in _ids(await rest.search(query="harbour city Sydney capital"))
    assert rejected.id in _ids(
        await rest.search(query="harbour city Sydney capital", include_other_branches=True)
    )
    on_branch = await rest.search(
        query="harbour city Sydney capital", conversation_id=conv.id, leaf_id=follow.id
    )
    assert rejected.id not in _ids(on_branch)
    assert _ids(on_branch) <= {q.id, kept.id, follow.id}
    assert on_branch  # the branch itself is still searched
    everything = await rest.search(
        query="harbour city Sydney capital",
        conversation_id=conv.id,
        leaf_id=follow.id,
        include_other_branches=True,
    )
    assert rejected.id in _ids(everything)
    # Neighbours follow the branch too.
    around = await rest.search(
        query="capital Australia", conversation_id=conv.id, leaf_id=follow.id, message_range=2
    )
    assert rejected.id not in _ids(around)
    for budget in (60, 200, 8000):
        text = await rest.context(conv.id, budget=budget, query="harbour city Sydney capital")
        assert "the harbour city." not in text


async def test_an_edited_question_and_everything_under_it_stay_out(rest: Rest) -> None:
    mem = rest.mem
    conv = mem.conversations.create(ALICE)
    old_q = mem.messages.append(
        ALICE, conv.id, role="user", content="Plan a spring trip to Lisbon with trams"
    )
    old_a = mem.messages.append(
        ALICE, conv.id, role="assistant", content="Lisbon in April: ride tram 28 to Alfama."
    )
    new_q = mem.messages.append(
        ALICE, conv.id, role="user", content="Plan a spring trip to Porto", parent_id=None
    )
    new_a = mem.messages.append(ALICE, conv.id, role="assistant", content="Porto in May.")
    for _ in range(30):  # a long branch: the old question is far from the leaf
        leaf = mem.messages.append(ALICE, conv.id, role="user", content="more wine ideas please")
    other = mem.conversations.create(ALICE)  # another conversation is not affected
    elsewhere = mem.messages.append(
        ALICE, other.id, role="user", content="Lisbon trams and Alfama are my favourites"
    )
    abandoned = {old_q.id, old_a.id}
    hits = await rest.search(query="Lisbon tram Alfama", conversation_id=conv.id, leaf_id=leaf.id)
    assert not abandoned & _ids(hits)
    hits = await rest.search(
        query="Lisbon tram Alfama",
        conversation_id=conv.id,
        leaf_id=leaf.id,
        include_other_branches=True,
    )
    assert abandoned <= _ids(hits)
    text = await rest.context(conv.id, budget=8000, query="Lisbon tram Alfama")
    assert "ride tram 28" not in text
    assert "Plan a spring trip to Lisbon" not in text
    assert elsewhere.content in text  # recalled from the other conversation
    assert new_a.content in text  # the new branch is the window
    assert new_q.content in text
    r = await rest.client.post(
        "/v1/recall/search",
        json={"query": "x", "include_other_branches": "sometimes"},
        headers=rest.headers,
    )
    assert r.status_code == 422


async def test_another_conversations_regenerated_answer_stays_out(rest: Rest) -> None:
    """Across conversations each one counts by its active branch: an answer regenerated
    away in an old chat is neither searched nor recalled in a new one, unless asked for;
    made active again, it is back (and its sibling out)."""
    mem = rest.mem
    _, wrong, right = _regenerated(
        mem,
        "Is Sydney the capital city of Australia?",
        "Yes, the capital is Sydney, its largest city.",
        "No: the capital is Canberra, not Sydney.",
    )
    old = mem.conversations.get(ALICE, wrong.conversation_id)
    new = mem.conversations.create(ALICE)
    ask = "Is Sydney the capital city of Australia?"
    mem.messages.append(ALICE, new.id, role="user", content=ask)
    for body in ({}, {"conversation_id": old.id}):
        hits = _ids(await rest.search(query="capital Sydney largest city", **body))
        assert wrong.id not in hits
        assert right.id in hits
        everything = await rest.search(
            query="capital Sydney largest city", include_other_branches=True, **body
        )
        assert wrong.id in _ids(everything)
    for budget in (200, 8000):
        text = await rest.context(new.id, budget=budget, query=ask)
        assert "its largest city" not in text
        assert "Canberra" in text
    # The old answer made active again: it is the truth now, its sibling is not.
    mem.conversations.set_active_leaf(ALICE, old.id, wrong.id)
    hits = _ids(await rest.search(query="capital Sydney largest city"))
    assert wrong.id in hits
    assert right.id not in hits
    assert "its largest city" in await rest.context(new.id, budget=8000, query=ask)
    # Neighbours follow the active branch, not the newest child.
    around = await rest.search(query="Is Sydney the capital city", message_range=1)
    assert wrong.id in _ids(around)
    assert right.id not in _ids(around)


def _naive_path(mem: Memory, scope: Scope, cid: str, leaf: str) -> set[str]:
    by_id = {m.id: m for m in mem.messages.list(scope, cid, limit=500).items}
    out: set[str] = set()
    cur: str | None = leaf
    while cur is not None:
        out.add(cur)
        cur = by_id[cur].parent_id
    return out


def test_labels_answer_ancestry_like_a_walk(memory: Memory) -> None:
    """Random trees (regenerations, edits, new roots): Branch.contains agrees with a walk
    from the leaf for every (message, leaf) pair."""
    rnd = random.Random(7)
    scope = fresh_scope()
    conv = memory.conversations.create(scope)
    ids: list[str] = []
    for i in range(120):
        parent: Any = rnd.choice(ids) if ids and rnd.random() < 0.35 else ...
        if ids and rnd.random() < 0.05:
            parent = None
        fields = {} if parent is ... else {"parent_id": parent}
        ids.append(
            memory.messages.append(scope, conv.id, role="user", content=f"m{i}", **fields).id
        )
    run = memory.core.engine.run
    labels = run(read(lambda: labels_of(conv.id, ids)))
    for leaf in rnd.sample(ids, 25):
        branch = run(read(partial(branch_of, conv.id, leaf)))
        assert branch is not None
        path = _naive_path(memory, scope, conv.id, leaf)
        got = {m for m in ids if branch.contains(*labels[m])}
        assert got == path
    assert run(read(lambda: branch_of(conv.id, "00000000-0000-0000-0000-000000000001"))) is None


def _grow(
    memory: Memory, scope: Scope, cid: str, rnd: random.Random, n: int, ids: list[str] | None = None
) -> list[str]:
    """Append ``n`` messages, each under a random earlier one 40% of the time (a fork when
    that one has a child), else after the active leaf; returns all ids (``ids`` extended)."""
    out = [] if ids is None else ids
    for i in range(n):
        fields = {"parent_id": rnd.choice(out)} if out and rnd.random() < 0.4 else {}
        out.append(memory.messages.append(scope, cid, role="user", content=f"m{i}", **fields).id)
    return out


def test_the_migration_labels_stored_messages_like_appends_do(memory: Memory) -> None:
    """Migration 10 labels messages stored before it existed: the same chains as the
    append path writes (run here on a tree whose labels were wiped)."""
    from memstrata.storage.plan import Exec, write
    from memstrata.storage.schema import MIGRATIONS

    rnd = random.Random(11)
    scope = fresh_scope()
    conv = memory.conversations.create(scope)
    ids = _grow(memory, scope, conv.id, rnd, 60)
    run = memory.core.engine.run
    before = run(read(lambda: labels_of(conv.id, ids)))
    (migration,) = [m for m in MIGRATIONS[memory.core.engine.dialect] if m.version == 10]

    def relabel() -> Any:
        yield Exec("UPDATE messages SET chain_id = NULL", ())
        for statement in migration.statements[1:]:  # all but the ALTER TABLE
            assert isinstance(statement, str)
            yield Exec(statement, ())

    run(write(relabel))
    assert run(read(lambda: labels_of(conv.id, ids))) == before


def _fork_rows(memory: Memory, cid: str) -> set[tuple[str, str, int]]:
    from memstrata.storage.plan import Query

    def rows() -> Any:
        found = yield Query(
            "SELECT head_id, from_chain, from_depth FROM message_forks WHERE conversation_id = ?",
            (cid,),
        )
        return {(str(h), str(c), int(d)) for h, c, d in found}

    out: set[tuple[str, str, int]] = memory.core.engine.run(read(rows))
    return out


def test_the_fork_migration_writes_the_rows_appends_do(memory: Memory) -> None:
    """Migration 19 derives message_forks from stored labels: the same rows the append
    path writes (run here on a tree whose fork rows were wiped)."""
    from memstrata.storage.plan import Exec, write
    from memstrata.storage.schema import MIGRATIONS

    rnd = random.Random(19)
    scope = fresh_scope()
    conv = memory.conversations.create(scope)
    _grow(memory, scope, conv.id, rnd, 80)
    before = _fork_rows(memory, conv.id)
    assert len(before) > 10  # the tree forks: rows to compare
    (migration,) = [m for m in MIGRATIONS[memory.core.engine.dialect] if m.version == 19]

    def refill() -> Any:
        yield Exec("DELETE FROM message_forks WHERE conversation_id = ?", (conv.id,))
        statement = migration.statements[-1]
        assert isinstance(statement, str)
        yield Exec(statement, ())

    memory.core.engine.run(write(refill))
    assert _fork_rows(memory, conv.id) == before


def test_ancestry_stays_exact_through_subtree_deletes(memory: Memory) -> None:
    """Deleting subtrees (n8n's deleteMessages) and appending again keeps every answer of
    Branch.contains equal to a walk, and leaves no fork row of a deleted message."""
    rnd = random.Random(23)
    scope = fresh_scope()
    conv = memory.conversations.create(scope)
    ids = _grow(memory, scope, conv.id, rnd, 70)
    for _ in range(4):
        gone = set()
        for victim in rnd.sample(ids, 2):
            if victim in ids and victim not in gone:
                before = {m.id for m in memory.messages.list(scope, conv.id, limit=500).items}
                memory.messages.delete(scope, conv.id, victim)
                after = {m.id for m in memory.messages.list(scope, conv.id, limit=500).items}
                gone |= before - after
        ids[:] = [m for m in ids if m not in gone]
        _grow(memory, scope, conv.id, rnd, 25, ids)
    run = memory.core.engine.run
    labels = run(read(lambda: labels_of(conv.id, ids)))
    for leaf in rnd.sample(ids, 20):
        branch = run(read(partial(branch_of, conv.id, leaf)))
        assert branch is not None
        assert {m for m in ids if branch.contains(*labels[m])} == _naive_path(
            memory, scope, conv.id, leaf
        )
    assert {head for head, _, _ in _fork_rows(memory, conv.id)} <= set(ids)


def test_an_import_rebuilds_the_fork_rows(memory: Memory, tmp_path: Path) -> None:
    """Exports leave message_forks out (derived); importing a user's export into an empty
    store writes them again, so branches there are what they were."""
    rnd = random.Random(29)
    scope = fresh_scope()
    conv = memory.conversations.create(scope)
    ids = _grow(memory, scope, conv.id, rnd, 50)
    lines: list[str] = []
    memory.transfer.export(lines.append, tenant=scope.tenant, user=scope.user)
    before = _fork_rows(memory, conv.id)
    assert before
    target = Memory.open(
        f"sqlite:///{(tmp_path / 'imported.db').as_posix()}", settings=Settings(worker="off")
    )
    try:
        target.transfer.import_(lines)
        assert _fork_rows(target, conv.id) == before
        leaf = ids[-1]
        branch = target.core.engine.run(read(partial(branch_of, conv.id, leaf)))
        assert branch is not None
        assert {m for m in ids if branch.contains(*labels_of_in(target, conv.id, ids)[m])} == (
            _naive_path(memory, scope, conv.id, leaf)
        )
    finally:
        target.close()


def labels_of_in(mem: Memory, cid: str, ids: list[str]) -> dict[str, tuple[str | None, int]]:
    out: dict[str, tuple[str | None, int]] = mem.core.engine.run(read(lambda: labels_of(cid, ids)))
    return out
