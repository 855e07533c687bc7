"""REST for node memory: add a turn (201 once durable), read the thread, delete; the
conversation must be the caller's; the conversation cascade removes node memories."""

from __future__ import annotations

import gzip
from collections.abc import Iterator

import pytest

from memstrata import AsyncMemory
from memstrata.nodes.service import blobs_for

pytestmark = pytest.mark.anyio


@pytest.fixture
def amemory(db_url: str) -> Iterator[AsyncMemory]:
    mem = AsyncMemory.open(db_url, blobs="memory://")
    yield mem
    mem.core.close()


def base(cid: str, node: str = "llm1", app: str = "app1") -> str:
    return f"/v1/apps/{app}/conversations/{cid}/nodes/{node}"


async def _conversation(client, headers) -> str:
    r = await client.post("/v1/conversations", json={}, headers=headers)
    assert r.status_code == 201
    return str(r.json()["id"])


async def test_add_read_and_delete(client, keys, auth, amemory):
    alice = auth(keys.alice)
    cid = await _conversation(client, alice)
    r = await client.post(
        f"{base(cid)}/turns",
        json={
            "message_id": "m1",
            "user_content": "hello",
            "user_files": [
                {"type": "image", "transfer_method": "remote_url", "url": "https://x/i.png"}
            ],
            "assistant_content": "hi",
        },
        headers=alice,
    )
    assert r.status_code == 201, r.text
    turn = r.json()
    assert turn["message_id"] == "m1"
    assert turn["user_files"][0]["url"] == "https://x/i.png"
    # Durable: the object is in the store already.
    assert blobs_for(amemory.core).store.list_prefix("node_memory/")
    r = await client.post(
        f"{base(cid)}/turns",
        json={"message_id": "m2", "parent_message_id": "m1", "user_content": "more " * 50},
        headers=alice,
    )
    assert r.status_code == 201
    r = await client.get(f"{base(cid)}/history", params={"current_message_id": "m2"}, headers=alice)
    assert r.status_code == 200
    body = r.json()
    assert [m["content"] for m in body["messages"]][:2] == ["hello", "hi"]
    assert set(body) == {"current_message_id", "messages", "tokens", "truncated", "over_budget"}
    assert body["current_message_id"] == "m2"
    r = await client.get(
        f"{base(cid)}/history", params={"current_message_id": "m2", "max_tokens": 20}, headers=alice
    )
    small = r.json()
    assert small["truncated"] is True
    assert [m["id"] for m in small["messages"]] == ["m2"]
    # Another node and another app have their own memories.
    r = await client.get(f"{base(cid, node='llm2')}/history", headers=alice)
    assert r.json()["messages"] == []
    r = await client.delete(base(cid), headers=alice)
    assert r.status_code == 204
    r = await client.get(f"{base(cid)}/history", headers=alice)
    assert r.json()["messages"] == []


async def test_other_scopes_get_404_and_bad_input_422(client, keys, auth, problem):
    alice, bob = auth(keys.alice), auth(keys.bob)
    cid = await _conversation(client, alice)
    turn = {"message_id": "m1", "user_content": "secret"}
    assert (await client.post(f"{base(cid)}/turns", json=turn, headers=alice)).status_code == 201
    problem(await client.post(f"{base(cid)}/turns", json=turn, headers=bob), 404)
    problem(await client.get(f"{base(cid)}/history", headers=bob), 404)
    problem(await client.delete(base(cid), headers=bob), 404)
    problem(await client.get(f"{base(cid)}/history", headers=auth(keys.carol)), 404)
    problem(await client.post(f"{base(cid, node='a..b')}/turns", json=turn, headers=alice), 422)
    problem(await client.post(f"{base(cid, app='%2e%2e')}/turns", json=turn, headers=alice), 422)
    problem(await client.post(f"{base(cid)}/turns", json={"message_id": "m2"}, headers=alice), 422)
    problem(
        await client.post(f"{base(cid)}/turns", json={"user_content": "no id"}, headers=alice), 422
    )
    problem(await client.get(f"{base(cid)}/history", headers={}), 401)
    r = await client.get(f"{base(cid)}/history", headers=alice)
    assert [m["content"] for m in r.json()["messages"]] == ["secret"]


async def test_deleting_the_conversation_deletes_node_memories(client, keys, auth, amemory):
    alice = auth(keys.alice)
    cid = await _conversation(client, alice)
    turn = {"message_id": "m1", "user_content": "x"}
    await client.post(f"{base(cid)}/turns", json=turn, headers=alice)
    await client.post(f"{base(cid, node='n2')}/turns", json=turn, headers=alice)
    assert (await client.delete(f"/v1/conversations/{cid}", headers=alice)).status_code == 204
    assert (await client.get(f"{base(cid)}/history", headers=alice)).status_code == 404
    # Purged with the conversation (its deletion receipt counts the blobs): no job left.
    assert blobs_for(amemory.core).store.list_prefix("node_memory/") == []
    assert await amemory.jobs.run_pending(["nodes.purge"]) == 0


async def test_a_turn_added_again_replays_or_replaces(client, keys, auth, amemory):
    from memstrata import Scope

    alice = auth(keys.alice)
    cid = await _conversation(client, alice)
    first = {"message_id": "m1", "user_content": "q1", "assistant_content": "draft"}
    second = {"message_id": "m2", "parent_message_id": "m1", "user_content": "q2"}
    for turn in (first, second, first):  # the repeated first turn is a replay
        r = await client.post(f"{base(cid)}/turns", json=turn, headers=alice)
        assert r.status_code == 201, r.text
        assert r.json()["revision"] is None
    r = await client.post(
        f"{base(cid)}/turns", json={**first, "assistant_content": "final"}, headers=alice
    )
    assert r.status_code == 201, r.text
    assert r.json()["revision"] is not None
    r = await client.get(f"{base(cid)}/history", headers=alice)
    assert [m["content"] for m in r.json()["messages"]] == ["q1", "final", "q2"]
    node = amemory.nodes.open(Scope("t1", "alice"), "app1", cid, "llm1")
    log = await node.message_log("m1")
    assert [t.assistant_content for t in log] == ["draft", "final"]


async def test_deleting_a_message_erases_its_node_turns(client, keys, auth, amemory):
    """Over REST (the async facade): the receipt erases the turns before the 204."""
    alice = auth(keys.alice)
    cid = await _conversation(client, alice)
    ids = []
    for text in ("keep me", "erase me"):
        r = await client.post(
            f"/v1/conversations/{cid}/messages",
            json={"role": "user", "content": text},
            headers=alice,
        )
        ids.append(r.json()["id"])
    for mid, parent in ((ids[0], None), (ids[1], ids[0])):
        turn = {"message_id": mid, "parent_message_id": parent, "user_content": f"node {mid}"}
        assert (
            await client.post(f"{base(cid)}/turns", json=turn, headers=alice)
        ).status_code == 201
    r = await client.delete(f"/v1/conversations/{cid}/messages/{ids[1]}", headers=alice)
    assert r.status_code == 204, r.text
    receipt = await client.get(f"/v1/receipts/{r.headers['X-Memstrata-Receipt']}", headers=alice)
    body = receipt.json()
    assert body["verified"] is True, body["findings"]
    assert body["tables"]["node_turn_ids"] == 1
    r = await client.get(f"{base(cid)}/history", headers=alice)
    assert [m["content"] for m in r.json()["messages"]] == [f"node {ids[0]}"]
    for meta in blobs_for(amemory.core).store.list_prefix("node_memory/"):
        assert f"node {ids[1]}".encode() not in gzip.decompress(
            blobs_for(amemory.core).store.get(meta.key).data
        )
