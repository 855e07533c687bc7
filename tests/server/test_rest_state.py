"""REST: context, compaction, plan (ETag / If-Match), iterations, snapshots, checkpoints
(410 once expired) and working memory."""

from __future__ import annotations

import pytest

from memstrata import Memory, Scope
from memstrata.tokens import get_tokenizer

pytestmark = pytest.mark.anyio


async def _conversation(client, headers, n: int = 0) -> str:
    r = await client.post("/v1/conversations", json={}, headers=headers)
    cid = r.json()["id"]
    for i in range(n):
        role = "user" if i % 2 == 0 else "assistant"
        content = f"message {i}: the build uses port {8000 + i} and fails with error E{i}. " * 3
        r = await client.post(
            f"/v1/conversations/{cid}/messages",
            json={"role": role, "content": content},
            headers=headers,
        )
        assert r.status_code == 201
    return cid


async def test_plan_etag_and_if_match(client, keys, auth, problem):
    h = auth(keys.alice)
    cid = await _conversation(client, h)
    url = f"/v1/conversations/{cid}/plan"
    problem(await client.get(url, headers=h), 404)
    problem(await client.put(url, json={"document": {}}, headers={**h, "If-Match": "*"}), 412)
    r = await client.put(
        url, json={"document": {"steps": ["a"]}}, headers={**h, "If-None-Match": "*"}
    )
    assert r.status_code == 200
    assert r.headers["ETag"] == '"1"'
    problem(await client.put(url, json={"document": {}}, headers={**h, "If-None-Match": "*"}), 412)
    r = await client.put(
        url, json={"document": {"steps": ["a", "b"]}}, headers={**h, "If-Match": '"1"'}
    )
    assert r.headers["ETag"] == '"2"'
    stale = await client.put(url, json={"document": {"x": 1}}, headers={**h, "If-Match": '"1"'})
    problem(stale, 412, "precondition_failed")
    r = await client.get(url, headers=h)
    assert (r.json()["document"], r.headers["ETag"]) == ({"steps": ["a", "b"]}, '"2"')
    # No precondition: the write goes through (documented: no 428).
    r = await client.put(url, json={"document": {"x": 2}}, headers=h)
    assert r.headers["ETag"] == '"3"'
    problem(await client.get(url, headers=auth(keys.bob)), 404)


async def test_working_memory_user_and_conversation(client, keys, auth, problem):
    h = auth(keys.alice)
    problem(await client.get("/v1/working-memory", headers=h), 404)
    r = await client.put("/v1/working-memory", json={"content": "# Alice"}, headers=h)
    assert (r.status_code, r.headers["ETag"]) == (200, '"1"')
    problem(
        await client.put(
            "/v1/working-memory", json={"content": "x"}, headers={**h, "If-Match": '"7"'}
        ),
        412,
    )
    cid = await _conversation(client, h)
    r = await client.put(
        f"/v1/working-memory?conversation_id={cid}",
        json={"content": {"task": "t"}, "json_schema": {"type": "object", "required": ["task"]}},
        headers=h,
    )
    assert r.json()["scope"] == "conversation"
    bad = await client.put(
        f"/v1/working-memory?conversation_id={cid}", json={"content": {}}, headers=h
    )
    problem(bad, 422)
    assert (await client.get("/v1/working-memory", headers=h)).json()["content"] == "# Alice"
    problem(await client.get("/v1/working-memory", headers=auth(keys.bob)), 404)
    problem(
        await client.get(f"/v1/working-memory?conversation_id={cid}", headers=auth(keys.bob)), 404
    )


async def test_working_memory_put_without_format_takes_the_format_sent(client, keys, auth):
    h = auth(keys.alice)
    r = await client.put("/v1/working-memory", json={"content": {"step": 1}}, headers=h)
    assert r.json()["format"] == "json"
    text = "# Plan\n- step two"
    r = await client.put("/v1/working-memory", json={"content": text}, headers=h)
    assert (r.json()["format"], r.json()["content"]) == ("markdown", text)
    cid = await _conversation(client, h)
    r = await client.post(f"/v1/conversations/{cid}/context", json={}, headers=h)
    prompt = "\n".join(str(m["content"]) for m in r.json()["messages"])
    assert text in prompt
    assert "\\n" not in prompt  # no JSON string escapes


async def test_iterations_snapshots_and_checkpoints(client, keys, auth, problem, admin_mem: Memory):
    h = auth(keys.alice)
    cid = await _conversation(client, h)
    base = f"/v1/conversations/{cid}"
    r = await client.post(
        f"{base}/iterations", json={"task": "build", "outcome": "failed", "error": "E"}, headers=h
    )
    assert (r.status_code, r.json()["attempt"]) == (201, 1)
    await client.post(f"{base}/iterations", json={"task": "build", "outcome": "ok"}, headers=h)
    r = await client.get(f"{base}/iterations?task=build", headers=h)
    assert [i["attempt"] for i in r.json()["items"]] == [1, 2]
    problem(await client.get(f"{base}/iterations", headers=auth(keys.bob)), 404)

    r = await client.put(f"{base}/runs/r1/snapshot", json={"data": {"tree": [1]}}, headers=h)
    assert r.json()["data"] == {"tree": [1]}
    assert (await client.get(f"{base}/runs/r1/snapshot", headers=h)).json()["data"] == {"tree": [1]}
    problem(await client.get(f"{base}/runs/r2/snapshot", headers=h), 404)

    r = await client.put(
        "/v1/checkpoints/approve/run-1", json={"state": {"s": 1}, "ttl_s": 60}, headers=h
    )
    assert r.json()["key"] == "approve:run-1"
    assert (await client.get("/v1/checkpoints/approve/run-1", headers=h)).json()["state"] == {
        "s": 1
    }
    problem(await client.get("/v1/checkpoints/approve/run-1", headers=auth(keys.bob)), 404)
    assert (await client.delete("/v1/checkpoints/approve/run-1", headers=h)).status_code == 204
    gone = problem(await client.get("/v1/checkpoints/approve/run-1", headers=h), 410, "expired")
    assert "This action has expired" in gone["detail"]
    problem(await client.delete("/v1/checkpoints/nothing/run-1", headers=h), 404)


async def test_the_summary_serving_a_branch(client, keys, auth, problem):
    h = auth(keys.alice)
    cid = await _conversation(client, h, 40)
    url = f"/v1/conversations/{cid}/summary"
    r = await client.get(url, headers=h)
    assert (r.status_code, r.json()) == (200, {"summary": None})  # nothing compacted yet
    made = await client.post(f"/v1/conversations/{cid}/compact", json={"wait": True}, headers=h)
    assert made.json()["outcome"] == "compacted"
    r = await client.get(url, headers=h)
    assert r.status_code == 200
    assert r.json()["summary"] == made.json()["summary"]
    covered = r.json()["summary"]["up_to_message_id"]
    assert (await client.get(url, params={"leaf_id": covered}, headers=h)).json() == r.json()

    # A branch that leaves the summarised one before its cover point has no summary.
    messages = (await client.get(f"/v1/conversations/{cid}/messages", headers=h)).json()["items"]
    fork = await client.post(
        f"/v1/conversations/{cid}/messages",
        json={"role": "user", "content": "another way", "parent_id": messages[0]["id"]},
        headers=h,
    )
    r = await client.get(url, params={"leaf_id": fork.json()["id"]}, headers=h)
    assert r.json() == {"summary": None}

    problem(await client.get(url, headers=auth(keys.bob)), 404)
    problem(await client.get(url, params={"leaf_id": "nope"}, headers=h), 404)
    problem(await client.get("/v1/conversations/nope/summary", headers=h), 404)


async def test_context_and_compact(client, keys, auth, problem, admin_mem: Memory):
    h = auth(keys.alice)
    cid = await _conversation(client, h, 60)
    r = await client.post(f"/v1/conversations/{cid}/context", json={"budget": 600}, headers=h)
    assert r.status_code == 200
    body = r.json()
    tok = get_tokenizer(body["report"]["encoding"])
    assert sum(tok.count_message(m["content"]) for m in body["messages"]) == body["report"]["total"]
    assert body["report"]["total"] <= 600
    assert body["report"]["dropped"]
    r = await client.post(f"/v1/conversations/{cid}/compact", json={"wait": True}, headers=h)
    assert (r.status_code, r.json()["outcome"]) == (200, "compacted")
    assert r.json()["summary"]["up_to_message_id"]
    r = await client.post(f"/v1/conversations/{cid}/compact", headers=h)
    assert r.status_code == 202
    assert r.json()["job"]["kind"] == "memstrata.compact"
    problem(await client.post(f"/v1/conversations/{cid}/compact", headers=auth(keys.bob)), 404)
    problem(
        await client.post(f"/v1/conversations/{cid}/context", json={"budget": 0}, headers=h), 422
    )
    r = await client.post(f"/v1/conversations/{cid}/context", json={"budget": 100_000}, headers=h)
    assert r.json()["report"]["summary_id"] is not None
    assert (
        admin_mem.compaction.summary(Scope("t1", "alice"), cid).id
        == r.json()["report"]["summary_id"]
    )
