"""Issue 21, finding 12: message ids are unique per conversation, so an id in use in
another conversation (any scope) is simply unused here and no answer tells the two apart.

Each test is named after the finding; docs/reliability.md lists them. SQLite and
PostgreSQL (the PostgreSQL cases skip without a server, see tests/support.py).
"""

from __future__ import annotations

import uuid
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from memstrata import AsyncMemory, Memory, Scope
from memstrata.config import Settings
from memstrata.errors import Conflict, NotFound
from memstrata.server import create_app
from memstrata.storage.plan import Query, read
from memstrata.testing import FakeEmbedder
from support import open_memory, postgres_schema, postgres_url_for

ALICE = Scope("t1", "alice")
CAROL = Scope("t2", "carol")


@pytest.fixture(params=["sqlite-file", "sqlite-memory", "postgres"])
def mem(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    yield from open_memory(request.param, tmp_path)


def _rows(mem: Memory, sql: str, params: tuple[Any, ...] = ()) -> list[tuple[Any, ...]]:
    def op() -> Any:
        rows = yield Query(sql, params)
        return [tuple(r) for r in rows]

    return list(mem.core.engine.run(read(op)))


def _contents(mem: Memory, scope: Scope, cid: str) -> list[str]:
    return [m.content for m in mem.history(scope, cid).messages]


# -- the library, every backend --------------------------------------------------------------


def test_finding12_an_id_of_another_scope_is_a_new_message_here(mem: Memory) -> None:
    mid = str(uuid.uuid4())
    a = mem.conversations.create(ALICE)
    c = mem.conversations.create(CAROL)
    mine, created = mem.messages.put(ALICE, a.id, id=mid, role="user", content="alpine fox")
    assert (mine.id, created) == (mid, True)
    theirs, created = mem.messages.put(CAROL, c.id, id=mid, role="user", content="desert fox")
    assert created is True  # not 409: nothing tells it from an unused id
    assert (theirs.id, theirs.conversation_id) == (mid, c.id)
    # Idempotency stays within the conversation: a replay answers from its own row only.
    again, created = mem.messages.put(CAROL, c.id, id=mid, role="user", content="desert fox")
    assert (again, created) == (theirs, False)
    with pytest.raises(Conflict):
        mem.messages.put(CAROL, c.id, id=mid, role="user", content="alpine fox")
    # Both intact and independent: history, get, recall.
    assert mem.messages.get(ALICE, a.id, mid).content == "alpine fox"
    assert mem.messages.get(CAROL, c.id, mid).content == "desert fox"
    assert _contents(mem, ALICE, a.id) == ["alpine fox"]
    assert _contents(mem, CAROL, c.id) == ["desert fox"]
    assert [h.message.content for h in mem.recall.search(ALICE, "fox")] == ["alpine fox"]
    assert [h.message.content for h in mem.recall.search(CAROL, "fox")] == ["desert fox"]
    # Replies attach to the parent of their own conversation.
    reply = mem.messages.append(CAROL, c.id, role="assistant", content="sand", parent_id=mid)
    assert reply.depth == 1
    assert _contents(mem, CAROL, c.id) == ["desert fox", "sand"]
    # Deleting one leaves the other, and everything derived from it, in place.
    mem.messages.delete(CAROL, c.id, mid)
    with pytest.raises(NotFound):
        mem.messages.get(CAROL, c.id, mid)
    assert mem.recall.search(CAROL, "fox") == []
    assert mem.messages.list(CAROL, c.id).items == []  # its reply went with it
    assert mem.messages.get(ALICE, a.id, mid).content == "alpine fox"
    assert [h.message.content for h in mem.recall.search(ALICE, "fox")] == ["alpine fox"]
    assert mem.conversations.get(ALICE, a.id).message_count == 1
    # The freed id can be used again there.
    _, created = mem.messages.put(CAROL, c.id, id=mid, role="user", content="arctic fox")
    assert created is True


def test_finding12_one_id_in_two_conversations_of_one_scope(mem: Memory) -> None:
    mem.core.recall.use(FakeEmbedder(32))
    ids = [str(uuid.uuid4()) for _ in range(3)]
    one = mem.conversations.create(ALICE)
    two = mem.conversations.create(ALICE)
    for cid, word in ((one.id, "granite"), (two.id, "basalt")):
        for n, mid in enumerate(ids):
            role = "user" if n % 2 == 0 else "assistant"
            mem.messages.put(ALICE, cid, id=mid, role=role, content=f"{word} rock {n}")
    mem.recall.flush(ALICE)
    # Every id names two messages: one per conversation, in its own tree.
    assert [m.content for m in mem.messages.list(ALICE, one.id).items] == [
        "granite rock 0",
        "granite rock 1",
        "granite rock 2",
    ]
    assert _contents(mem, ALICE, two.id) == ["basalt rock 0", "basalt rock 1", "basalt rock 2"]
    assert [m.content for m in mem.messages.path(ALICE, two.id, ids[1])] == [
        "basalt rock 0",
        "basalt rock 1",
    ]
    assert [m.id for m in mem.messages.leaves(ALICE, one.id).items] == [ids[2]]
    # Recall keeps them apart: six messages, each with neighbours from its own conversation.
    hits = mem.recall.search(ALICE, "rock", k=10)
    assert sorted((h.conversation_id, h.message.content) for h in hits) == sorted(
        (cid, f"{word} rock {n}")
        for cid, word in ((one.id, "granite"), (two.id, "basalt"))
        for n in range(3)
    )
    around = mem.recall.search(ALICE, "basalt", k=1, message_range=1, conversation_id=two.id)
    assert {h.message.conversation_id for h in around} == {two.id}
    assert all(h.message.content.startswith("basalt") for h in around)
    vectors = _rows(mem, "SELECT conversation_id, message_id FROM vectors")
    assert sorted(vectors) == sorted((cid, mid) for cid in (one.id, two.id) for mid in ids)
    # Deleting the middle message of one conversation takes its subtree there only.
    mem.messages.delete(ALICE, one.id, ids[1])
    assert _contents(mem, ALICE, one.id) == ["granite rock 0"]
    assert _contents(mem, ALICE, two.id) == ["basalt rock 0", "basalt rock 1", "basalt rock 2"]
    assert sorted(h.message.content for h in mem.recall.search(ALICE, "rock", k=10)) == [
        "basalt rock 0",
        "basalt rock 1",
        "basalt rock 2",
        "granite rock 0",
    ]
    left = _rows(mem, "SELECT conversation_id, message_id FROM vectors")
    assert sorted(left) == sorted([(one.id, ids[0])] + [(two.id, mid) for mid in ids])
    # A whole conversation goes without touching its twin.
    mem.conversations.delete(ALICE, two.id)
    assert _contents(mem, ALICE, one.id) == ["granite rock 0"]
    assert [h.message.content for h in mem.recall.search(ALICE, "rock")] == ["granite rock 0"]


# -- REST, the finding as reported -----------------------------------------------------------


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{(tmp_path / 'ids.db').as_posix()}"
        return
    with postgres_schema() as schema:
        yield postgres_url_for(schema)


@pytest.fixture
async def rest(store_url: str, tmp_path: Path) -> AsyncIterator[tuple[httpx.AsyncClient, Memory]]:
    settings = Settings(db=store_url, home=tmp_path, worker="off")
    sync = Memory.open(store_url, settings=settings)
    amem = AsyncMemory.open(store_url, settings=settings)
    transport = httpx.ASGITransport(app=create_app(amem, settings), raise_app_exceptions=False)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://memstrata.test") as c:
            yield c, sync
    finally:
        await amem.close()
        sync.close()


@pytest.mark.anyio
@pytest.mark.parametrize("anyio_backend", ["asyncio"])
async def test_finding12_rest_another_scopes_id_answers_201(
    rest: tuple[httpx.AsyncClient, Memory], anyio_backend: str
) -> None:
    client, mem = rest
    alice = {"Authorization": f"Bearer {mem.keys.create('t1', user='alice')[1]}"}
    carol = {"Authorization": f"Bearer {mem.keys.create('t2', user='carol')[1]}"}
    mid = str(uuid.uuid4())

    async def conversation(headers: dict[str, str]) -> str:
        r = await client.post("/v1/conversations", json={}, headers=headers)
        assert r.status_code == 201, r.text
        return str(r.json()["id"])

    async def post(cid: str, headers: dict[str, str], content: str) -> httpx.Response:
        body = {"id": mid, "role": "user", "content": content}
        return await client.post(f"/v1/conversations/{cid}/messages", json=body, headers=headers)

    a, c = await conversation(alice), await conversation(carol)
    assert (await post(a, alice, "mine")).status_code == 201
    assert (await post(c, carol, "theirs")).status_code == 201  # was 409: the oracle
    assert (await post(c, carol, "theirs")).status_code == 200  # a replay of one's own
    assert (await post(c, carol, "changed")).status_code == 409  # only one's own conflicts
    own = await conversation(carol)
    assert (await post(own, carol, "again")).status_code == 201  # same scope, other conversation
    for cid, headers, content in ((a, alice, "mine"), (c, carol, "theirs"), (own, carol, "again")):
        r = await client.get(f"/v1/conversations/{cid}/messages/{mid}", headers=headers)
        assert r.json()["content"] == content
    r = await client.delete(f"/v1/conversations/{c}/messages/{mid}", headers=carol)
    assert r.status_code == 204
    r = await client.get(f"/v1/conversations/{a}/history", headers=alice)
    assert [m["content"] for m in r.json()["messages"]] == ["mine"]
    r = await client.get(f"/v1/conversations/{own}/history", headers=carol)
    assert [m["content"] for m in r.json()["messages"]] == ["again"]
