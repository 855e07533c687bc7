"""Over REST, with the default embedder: a message is found by meaning on the very next
request after its append returned (no job, no wait), in search and in the context."""

from __future__ import annotations

import pytest

from memstrata import Memory

pytestmark = pytest.mark.anyio

NOTES = [
    "I was raised on a farm outside Cork.",
    "My husband Theo teaches chemistry at a secondary school.",
    "I tore a ligament in my right knee playing football last year.",
]


async def test_read_your_writes_by_meaning(client, keys, auth) -> None:  # type: ignore[no-untyped-def]
    h = auth(keys.alice)
    for text in NOTES:
        conv = (await client.post("/v1/conversations", json={"title": "notes"}, headers=h)).json()
        r = await client.post(
            f"/v1/conversations/{conv['id']}/messages",
            json={"role": "user", "content": text},
            headers=h,
        )
        assert r.status_code == 201, r.text
    # No word of the question is in the note: only its meaning finds it.
    r = await client.post(
        "/v1/recall/search", json={"query": "Which joint did I injure?", "k": 1}, headers=h
    )
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["pending"] == 0
    assert body["hits"][0]["message"]["content"] == NOTES[2]
    # The context of a new conversation, asked right away, carries it too.
    conv = (await client.post("/v1/conversations", json={"title": "now"}, headers=h)).json()
    await client.post(
        f"/v1/conversations/{conv['id']}/messages",
        json={"role": "user", "content": "Where did I spend my childhood?"},
        headers=h,
    )
    r = await client.post(
        f"/v1/conversations/{conv['id']}/context", json={"budget": 4000}, headers=h
    )
    assert r.status_code == 200, r.text
    ctx = r.json()
    assert "Cork" in " ".join(str(m["content"]) for m in ctx["messages"][:-1])
    assert ctx["report"]["tiers"]["recall"]["pending"] == 0


async def test_keyword_only_recall_reports_nothing_pending(  # type: ignore[no-untyped-def]
    client, keys, auth, amemory, admin_mem: Memory
) -> None:
    amemory.core.recall.use(None)
    h = auth(keys.alice)
    conv = (await client.post("/v1/conversations", json={}, headers=h)).json()
    await client.post(
        f"/v1/conversations/{conv['id']}/messages",
        json={"role": "user", "content": "the parrot sings"},
        headers=h,
    )
    r = await client.post("/v1/recall/search", json={"query": "parrot"}, headers=h)
    assert r.json()["pending"] == 0
