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


async def test_search_says_relevance_pending_and_why_not(  # type: ignore[no-untyped-def]
    client, keys, auth, problem, admin_mem: Memory
) -> None:
    alice, bob = Scope("t1", "alice"), Scope("t1", "bob")
    conv = admin_mem.conversations.create(alice)
    msg = admin_mem.messages.append(alice, conv.id, role="user", content="my parrot sings")
    theirs = admin_mem.conversations.create(bob)
    foreign = admin_mem.messages.append(bob, theirs.id, role="user", content="parrot of bob")
    r = await client.post(
        "/v1/recall/search",
        json={
            "query": "parrot",
            "explain": True,
            "explain_ids": [msg.id, foreign.id, "nope"],
        },
        headers=auth(keys.alice),
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["pending"] == 0
    (hit,) = body["hits"]
    assert 0.0 <= hit["relevance"] <= 1.0
    assert hit["signals"]["keyword_coverage"] > 0
    assert {e["id"]: e["reason"] for e in body["explained"]} == {
        msg.id: "returned",
        foreign.id: "unknown",  # bob's message reads like one that does not exist
        "nope": "unknown",
    }
    assert "parrot of bob" not in r.text
    plain = await client.post(
        "/v1/recall/search", json={"query": "parrot"}, headers=auth(keys.alice)
    )
    assert "signals" not in plain.json()["hits"][0]
    assert plain.json()["explained"] == []
    none = await client.post(
        "/v1/recall/search",
        json={"query": "parrot", "min_relevance": 1.0},
        headers=auth(keys.alice),
    )
    assert none.json()["hits"] == []
    for bad in (
        {"min_relevance": 2},
        {"min_relevance": -1},
        {"explain_ids": "abc"},
        {"explain_ids": [str(i) for i in range(101)]},
    ):
        problem(
            await client.post(
                "/v1/recall/search", json={"query": "x", **bad}, headers=auth(keys.alice)
            ),
            422,
        )
