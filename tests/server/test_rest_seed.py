"""The seed systems' semantics over REST: Dify's history before a query and uncapped
history, n8n's single-message delete and task briefings, DeerFlow's observe."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.anyio


@pytest.fixture
def alice(keys, auth):
    return auth(keys.alice)


@pytest.fixture
async def conv(client, alice):
    r = await client.post("/v1/conversations", json={}, headers=alice)
    return r.json()["id"]


async def _post(client, headers, cid, role, content, **extra):
    r = await client.post(
        f"/v1/conversations/{cid}/messages",
        json={"role": role, "content": content, **extra},
        headers=headers,
    )
    assert r.status_code == 201, r.text
    return r.json()


async def test_history_before_leaves_the_query_out(client, alice, conv):
    await _post(client, alice, conv, "user", "one?")
    await _post(client, alice, conv, "assistant", "1")
    q = await _post(client, alice, conv, "user", "two?")
    r = await client.get(
        f"/v1/conversations/{conv}/history", params={"before": q["id"]}, headers=alice
    )
    assert r.status_code == 200, r.text
    assert [m["content"] for m in r.json()["messages"]] == ["one?", "1"]
    # With a leaf whose branch holds it: the same history.
    both = {"before": q["id"], "leaf_id": q["id"]}
    r = await client.get(f"/v1/conversations/{conv}/history", params=both, headers=alice)
    assert r.status_code == 200, r.text
    assert [m["content"] for m in r.json()["messages"]] == ["one?", "1"]
    side = await _post(client, alice, conv, "user", "side?", parent_id=None)
    off = {"before": side["id"], "leaf_id": q["id"]}
    r = await client.get(f"/v1/conversations/{conv}/history", params=off, headers=alice)
    assert r.status_code == 422
    assert "not on the branch" in r.json()["detail"]


async def test_a_message_is_found_by_id_alone_in_the_callers_scope(client, alice, keys, auth, conv):
    q = await _post(client, alice, conv, "user", "mine")
    r = await client.get(f"/v1/messages/{q['id']}", headers=alice)
    assert r.status_code == 200, r.text
    assert (r.json()["conversation_id"], r.json()["content"]) == (conv, "mine")
    r = await client.get(f"/v1/messages/{q['id']}", headers=auth(keys.bob))
    assert r.status_code == 404


async def test_delete_with_mode_splice_keeps_the_children(client, alice, conv):
    q1 = await _post(client, alice, conv, "user", "one?")
    a1 = await _post(client, alice, conv, "assistant", "1")
    q2 = await _post(client, alice, conv, "user", "two?")
    base = f"/v1/conversations/{conv}/messages"
    r = await client.delete(f"{base}/{a1['id']}", params={"mode": "splice"}, headers=alice)
    assert r.status_code == 204, r.text
    r = await client.get(f"{base}/{q2['id']}", headers=alice)
    assert r.json()["parent_id"] == q1["id"]
    r = await client.delete(f"{base}/{q2['id']}", params={"mode": "all"}, headers=alice)
    assert r.status_code == 422


async def test_history_before_a_message_of_another_scope_is_404(client, alice, keys, auth, conv):
    q = await _post(client, alice, conv, "user", "mine")
    bob = auth(keys.bob)
    r = await client.post("/v1/conversations", json={}, headers=bob)
    theirs = r.json()["id"]
    r = await client.get(
        f"/v1/conversations/{theirs}/history", params={"before": q["id"]}, headers=bob
    )
    assert r.status_code == 404


async def test_history_max_messages_none_lifts_the_cap(client, alice, conv):
    for i in range(3):
        await _post(client, alice, conv, "user", f"q{i}")
    url = f"/v1/conversations/{conv}/history"
    r = await client.get(url, params={"max_messages": "none"}, headers=alice)
    assert len(r.json()["messages"]) == 3
    r = await client.get(url, params={"max_messages": "1"}, headers=alice)
    assert len(r.json()["messages"]) == 1
    for bad in ("0", "-1", "many"):
        r = await client.get(url, params={"max_messages": bad}, headers=alice)
        assert r.status_code == 422, bad


async def test_delete_message_answers_204_and_404_elsewhere(client, alice, keys, auth, conv):
    q = await _post(client, alice, conv, "user", "one?")
    a = await _post(client, alice, conv, "assistant", "1")
    url = f"/v1/conversations/{conv}/messages/{a['id']}"
    bob = auth(keys.bob)
    assert (await client.delete(url, headers=bob)).status_code == 404
    r = await client.post("/v1/conversations", json={}, headers=alice)
    other = r.json()["id"]
    wrong = f"/v1/conversations/{other}/messages/{a['id']}"
    assert (await client.delete(wrong, headers=alice)).status_code == 404
    r = await client.delete(url, headers=alice)
    assert r.status_code == 204
    assert r.content == b""
    assert (await client.get(url, headers=alice)).status_code == 404
    conv_now = (await client.get(f"/v1/conversations/{conv}", headers=alice)).json()
    assert conv_now["active_leaf_id"] == q["id"]
    assert conv_now["message_count"] == 1
    assert (await client.delete(url, headers=alice)).status_code == 404


async def test_context_task_adds_the_failed_attempts(client, alice, conv):
    await _post(client, alice, conv, "user", "deploy")
    it = f"/v1/conversations/{conv}/iterations"
    body = {"task": "deploy", "outcome": "failed", "error": "port busy"}
    r = await client.post(it, json=body, headers=alice)
    assert r.status_code == 201, r.text
    ctx = f"/v1/conversations/{conv}/context"
    plain = (await client.post(ctx, json={}, headers=alice)).json()
    assert not any("<failed-attempts>" in m["content"] for m in plain["messages"])
    briefed = (await client.post(ctx, json={"task": "deploy"}, headers=alice)).json()
    blocks = [m["content"] for m in briefed["messages"] if "<failed-attempts>" in m["content"]]
    assert len(blocks) == 1
    assert "port busy" in blocks[0]
    assert briefed["report"]["tiers"]["iterations"]["items"] == 1


async def test_observe_queues_extraction_as_a_job(client, alice, keys, auth, conv):
    m = await _post(client, alice, conv, "user", "I like tea")
    url = f"/v1/conversations/{conv}/observe"
    r = await client.post(url, json={"leaf_id": m["id"]}, headers=alice)
    assert r.status_code == 202, r.text
    job = r.json()["job"]
    assert job["kind"] == "longterm.extract"
    assert job["conversation_id"] == conv
    again = await client.post(url, headers=alice)  # merged into the queued job
    assert again.status_code == 202
    assert again.json()["job"]["id"] == job["id"]
    r = await client.get(f"/v1/jobs/{job['id']}", headers=alice)
    assert r.status_code == 200
    assert (await client.post(url, json={}, headers=auth(keys.bob))).status_code == 404
    unknown = {"leaf_id": "01900000-0000-7000-8000-000000000000"}
    assert (await client.post(url, json=unknown, headers=alice)).status_code == 404
