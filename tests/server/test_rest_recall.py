"""POST /v1/recall/search: the caller's scope only, the pinned shape, validation."""

from __future__ import annotations

import pytest

from memstrata import Memory, Scope

pytestmark = pytest.mark.anyio


@pytest.fixture(autouse=True)
def keywords_only(amemory, admin_mem: Memory) -> None:  # type: ignore[no-untyped-def]
    # Keyword recall: these tests are about the surface, not about the embedder.
    amemory.core.recall.use(None)
    admin_mem.core.recall.use(None)


async def test_search_returns_own_hits(client, keys, auth, problem, admin_mem: Memory) -> None:  # type: ignore[no-untyped-def]
    alice, bob = Scope("t1", "alice"), Scope("t1", "bob")
    conv = admin_mem.conversations.create(alice)
    msg = admin_mem.messages.append(
        alice, conv.id, role="user", content="my canary-alice is a parrot"
    )
    other = admin_mem.conversations.create(bob)
    admin_mem.messages.append(bob, other.id, role="user", content="bob's parrot canary-bob")
    r = await client.post("/v1/recall/search", json={"query": "parrot"}, headers=auth(keys.alice))
    assert r.status_code == 200, r.text
    hits = r.json()["hits"]
    assert [h["message"]["id"] for h in hits] == [msg.id]
    assert hits[0]["conversation_id"] == conv.id
    assert hits[0]["provenance"] == [msg.id]
    assert isinstance(hits[0]["score"], float)
    assert "canary-bob" not in r.text
    r = await client.post(
        "/v1/recall/search",
        json={"query": "parrot", "k": 3, "conversation_id": other.id},
        headers=auth(keys.alice),
    )
    problem(r, 404)
    r = await client.post(
        "/v1/recall/search", json={"query": "parrot"}, headers=auth(keys.admin, user="bob")
    )
    assert "canary-alice" not in r.text
    assert "canary-bob" in r.text
    problem(
        await client.post("/v1/recall/search", json={"query": ""}, headers=auth(keys.alice)), 422
    )
    problem(
        await client.post(
            "/v1/recall/search", json={"query": "x", "k": 0}, headers=auth(keys.alice)
        ),
        422,
    )
    problem(await client.post("/v1/recall/search", json={"query": "x"}), 401)
