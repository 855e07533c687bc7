"""Messages: append (parent omitted vs null, idempotent ids), pending + PATCH, leaves, history."""

from __future__ import annotations

import uuid

import pytest

from memstrata.tokens import get_tokenizer

pytestmark = pytest.mark.anyio

UNKNOWN = "01900000-0000-7000-8000-000000000000"


@pytest.fixture
async def conv(client, keys, auth):
    r = await client.post("/v1/conversations", json={"title": "t"}, headers=auth(keys.alice))
    return r.json()["id"]


@pytest.fixture
def post(client, keys, auth, conv):
    async def _post(body, cid=None):
        return await client.post(
            f"/v1/conversations/{cid or conv}/messages", json=body, headers=auth(keys.alice)
        )

    return _post


async def test_append_returns_201_with_the_stored_message(post, conv, client, keys, auth):
    r = await post({"role": "user", "content": "hello", "metadata": {"lang": "en"}})
    assert r.status_code == 201
    m = r.json()
    assert r.headers["location"] == f"/v1/conversations/{conv}/messages/{m['id']}"
    assert m["conversation_id"] == conv
    assert m["parent_id"] is None
    assert m["role"] == "user"
    assert m["content"] == "hello"
    assert m["status"] == "complete"
    assert m["metadata"] == {"lang": "en"}
    assert m["depth"] == 0
    assert m["token_count"] > 4
    assert {"seq", "occurred_at", "created_at", "branch_tokens", "files", "tool_calls"} <= set(m)
    got = await client.get(f"/v1/conversations/{conv}/messages/{m['id']}", headers=auth(keys.alice))
    assert got.status_code == 200
    assert got.json() == m
    c = (await client.get(f"/v1/conversations/{conv}", headers=auth(keys.alice))).json()
    assert c["active_leaf_id"] == m["id"]
    assert c["message_count"] == 1


async def test_parent_omitted_follows_the_active_leaf_but_null_starts_a_root(post):
    a = (await post({"role": "user", "content": "first"})).json()
    b = (await post({"role": "assistant", "content": "reply"})).json()
    assert b["parent_id"] == a["id"]
    assert b["depth"] == 1
    root = (await post({"role": "user", "content": "fresh start", "parent_id": None})).json()
    assert root["parent_id"] is None
    assert root["depth"] == 0
    after = (await post({"role": "assistant", "content": "after the new root"})).json()
    assert after["parent_id"] == root["id"]


async def test_explicit_parent_makes_a_sibling_branch(post, client, conv, keys, auth):
    q = (await post({"role": "user", "content": "q"})).json()
    a1 = (await post({"role": "assistant", "content": "answer one"})).json()
    a2 = (await post({"role": "assistant", "content": "answer two", "parent_id": q["id"]})).json()
    assert a2["parent_id"] == q["id"]
    leaves = (await client.get(f"/v1/conversations/{conv}/leaves", headers=auth(keys.alice))).json()
    assert [m["id"] for m in leaves["items"]] == [a1["id"], a2["id"]]
    assert leaves["next_cursor"] is None
    h1 = await client.get(
        f"/v1/conversations/{conv}/history", params={"leaf_id": a1["id"]}, headers=auth(keys.alice)
    )
    assert [m["content"] for m in h1.json()["messages"]] == ["q", "answer one"]
    h2 = await client.get(f"/v1/conversations/{conv}/history", headers=auth(keys.alice))
    assert [m["content"] for m in h2.json()["messages"]] == ["q", "answer two"]


async def test_unknown_parent_is_404(post, problem):
    problem(await post({"role": "user", "content": "x", "parent_id": UNKNOWN}), 404, "not_found")


async def test_replaying_an_id_is_200_and_other_content_409(
    post, problem, client, conv, keys, auth
):
    mid = str(uuid.uuid4())
    first = await post({"id": mid, "role": "user", "content": "same"})
    assert first.status_code == 201
    replay = await post({"id": mid, "role": "user", "content": "same"})
    assert replay.status_code == 200
    assert replay.json() == first.json()
    problem(await post({"id": mid, "role": "user", "content": "different"}), 409, "conflict")
    problem(await post({"id": mid, "role": "assistant", "content": "same"}), 409)
    c = (await client.get(f"/v1/conversations/{conv}", headers=auth(keys.alice))).json()
    assert c["message_count"] == 1


async def test_pending_message_is_completed_with_patch(post, client, conv, keys, auth, problem):
    h = auth(keys.alice)
    await post({"role": "user", "content": "tell me"})
    pending = (await post({"role": "assistant", "content": "", "status": "pending"})).json()
    assert pending["status"] == "pending"
    # History leaves out a reply still streaming.
    hist = (await client.get(f"/v1/conversations/{conv}/history", headers=h)).json()
    assert [m["content"] for m in hist["messages"]] == ["tell me"]
    # Replying to a pending message is refused until it is complete.
    problem(await post({"role": "user", "content": "hurry"}), 409)

    url = f"/v1/conversations/{conv}/messages/{pending['id']}"
    r = await client.patch(url, json={"content": "done", "status": "complete"}, headers=h)
    assert r.status_code == 200
    assert r.json()["status"] == "complete"
    assert r.json()["content"] == "done"
    assert r.json()["token_count"] > pending["token_count"]
    hist = (await client.get(f"/v1/conversations/{conv}/history", headers=h)).json()
    assert [m["content"] for m in hist["messages"]] == ["tell me", "done"]

    # Only a pending message can change.
    problem(await client.patch(url, json={"content": "again"}, headers=h), 409, "conflict")
    problem(await client.patch(url, json={"content": ""}, headers=h), 422)
    problem(await client.patch(url, json={"content": "x", "status": "pending"}, headers=h), 422)
    problem(
        await client.patch(
            f"/v1/conversations/{conv}/messages/{UNKNOWN}", json={"content": "x"}, headers=h
        ),
        404,
    )


@pytest.mark.parametrize(
    "body",
    [
        {"role": "wizard", "content": "x"},
        {"content": "no role"},
        {"role": "user", "content": ""},
        {"role": "user", "content": "x", "status": "pending"},
        {"role": "tool", "content": "result"},  # a tool message needs tool_call_id
        {"role": "user", "content": "x", "parent_id": 12},
        {"role": "user", "content": "x", "id": "not-a-uuid"},
        {"role": "user", "content": "x", "files": [{"type": "image"}]},
        {"role": "user", "content": "x", "surprise": 1},
    ],
)
async def test_invalid_messages_are_422(post, problem, body):
    problem(await post(body), 422, "invalid_input")


@pytest.mark.parametrize("raw", [b"not json", b"[1, 2]", b'"text"', b""])
async def test_append_body_must_be_a_json_object(client, conv, keys, auth, problem, raw):
    headers = {**auth(keys.alice), "Content-Type": "application/json"}
    r = await client.post(f"/v1/conversations/{conv}/messages", content=raw, headers=headers)
    problem(r, 422, "invalid_input")


async def test_tool_calls_and_files_round_trip(post):
    call = {"id": "call_1", "type": "function", "function": {"name": "f", "arguments": "{}"}}
    a = (
        await post(
            {
                "role": "user",
                "content": "look",
                "files": [
                    {
                        "type": "image",
                        "transfer_method": "remote_url",
                        "url": "https://example.invalid/x.png",
                    }
                ],
            }
        )
    ).json()
    assert a["files"][0]["url"] == "https://example.invalid/x.png"
    b = (await post({"role": "assistant", "content": "", "tool_calls": [call]})).json()
    assert b["tool_calls"] == [call]
    t = (await post({"role": "tool", "content": "42", "tool_call_id": "call_1"})).json()
    assert t["tool_call_id"] == "call_1"


async def test_get_message_unknown_or_malformed_is_404(client, conv, keys, auth, problem):
    for mid in (UNKNOWN, "nope"):
        r = await client.get(f"/v1/conversations/{conv}/messages/{mid}", headers=auth(keys.alice))
        problem(r, 404, "not_found")


async def test_message_of_another_conversation_is_404(post, client, keys, auth, problem):
    h = auth(keys.alice)
    m = (await post({"role": "user", "content": "x"})).json()
    other = (await client.post("/v1/conversations", headers=h)).json()["id"]
    problem(await client.get(f"/v1/conversations/{other}/messages/{m['id']}", headers=h), 404)


async def test_leaves_walk_every_page(post, client, conv, keys, auth):
    q = (await post({"role": "user", "content": "q"})).json()
    made = []
    for i in range(5):
        made.append(
            (await post({"role": "assistant", "content": f"a{i}", "parent_id": q["id"]})).json()[
                "id"
            ]
        )
    seen, cursor = [], None
    for _ in range(10):
        params = {"limit": 2} | ({"cursor": cursor} if cursor else {})
        r = await client.get(
            f"/v1/conversations/{conv}/leaves", params=params, headers=auth(keys.alice)
        )
        assert r.status_code == 200
        seen += [m["id"] for m in r.json()["items"]]
        cursor = r.json()["next_cursor"]
        if cursor is None:
            break
    assert seen == made


async def test_history_budget_and_parameters(post, client, conv, keys, auth, problem):
    h = auth(keys.alice)
    await post({"role": "system", "content": "be brief"})
    for i in range(6):
        await post({"role": "user", "content": f"question {i}: 你好 wörld " + "word " * 30})
        await post({"role": "assistant", "content": f"answer {i}: héllo 🚀 " + "word " * 30})
    url = f"/v1/conversations/{conv}/history"
    full = (await client.get(url, headers=h)).json()
    assert set(full) == {"leaf_id", "messages", "tokens", "truncated", "over_budget"}
    assert len(full["messages"]) == 13
    assert not full["truncated"]
    assert set(full["messages"][0]) == {
        "id",
        "role",
        "content",
        "files",
        "tool_calls",
        "tool_call_id",
    }

    small = (await client.get(url, params={"max_tokens": 200}, headers=h)).json()
    assert small["truncated"]
    assert small["tokens"] <= 200
    assert small["messages"][0]["role"] == "system"  # leading system messages are kept
    assert small["messages"][1]["role"] == "user"  # whole turns only
    assert small["messages"][-1]["content"].startswith("answer 5")

    few = (await client.get(url, params={"max_messages": 3}, headers=h)).json()
    assert [m["role"] for m in few["messages"]] == ["system", "user", "assistant"]

    tiny = (await client.get(url, params={"max_tokens": 10}, headers=h)).json()
    assert tiny["over_budget"]  # the newest turn is always kept

    # Token counts follow the shared rule in the encoding asked for.
    for model, name in (
        (None, "o200k_base"),
        ("cl100k_base", "cl100k_base"),
        ("gpt-4", "cl100k_base"),
    ):
        params = {"model": model} if model else {}
        got = (await client.get(url, params=params, headers=h)).json()
        tok = get_tokenizer(name)
        assert got["tokens"] == sum(tok.count_message(m["content"]) for m in got["messages"])
        assert len(got["messages"]) == 13

    problem(await client.get(url, params={"max_tokens": -1}, headers=h), 422)
    problem(await client.get(url, params={"max_messages": 0}, headers=h), 422)
    problem(await client.get(url, params={"leaf_id": UNKNOWN}, headers=h), 404)


async def test_history_of_an_empty_conversation(client, conv, keys, auth):
    r = await client.get(f"/v1/conversations/{conv}/history", headers=auth(keys.alice))
    assert r.json() == {
        "leaf_id": None,
        "messages": [],
        "tokens": 0,
        "truncated": False,
        "over_budget": False,
    }


async def test_append_to_unknown_conversation_is_404(post, problem):
    problem(await post({"role": "user", "content": "x"}, cid=UNKNOWN), 404, "not_found")


async def _all_messages(client, conv, headers, limit):
    """Walk /messages page by page; returns the ids in order and the pages' sizes."""
    ids, sizes, cursor = [], [], None
    for _ in range(50):
        params = {"limit": limit} | ({"cursor": cursor} if cursor else {})
        r = await client.get(f"/v1/conversations/{conv}/messages", params=params, headers=headers)
        assert r.status_code == 200, r.text
        body = r.json()
        ids += [m["id"] for m in body["items"]]
        sizes.append(len(body["items"]))
        cursor = body["next_cursor"]
        if cursor is None:
            return ids, sizes
    pytest.fail("the cursor never ran out")


async def test_list_messages_pages_through_every_branch_oldest_first(
    post, client, conv, keys, auth
):
    q = (await post({"role": "user", "content": "q"})).json()
    a1 = (await post({"role": "assistant", "content": "a1"})).json()
    a2 = (await post({"role": "assistant", "content": "a2", "parent_id": q["id"]})).json()
    q2 = (await post({"role": "user", "content": "q edited", "parent_id": None})).json()
    a3 = (await post({"role": "assistant", "content": "a3"})).json()
    follow = (await post({"role": "user", "content": "more", "parent_id": a1["id"]})).json()
    made = [q, a1, a2, q2, a3, follow]
    h = auth(keys.alice)
    for limit in (1, 2, 4, 6, 50):
        ids, sizes = await _all_messages(client, conv, h, limit)
        assert ids == [m["id"] for m in made]
        assert all(s == limit for s in sizes[:-1])
        assert 1 <= sizes[-1] <= limit
    first = (await client.get(f"/v1/conversations/{conv}/messages", headers=h)).json()
    assert first["next_cursor"] is None
    assert first["items"] == [
        (await client.get(f"/v1/conversations/{conv}/messages/{m['id']}", headers=h)).json()
        for m in made
    ]
    # Parents come first, so one pass rebuilds the tree.
    seen: set[str] = set()
    for m in first["items"]:
        assert m["parent_id"] is None or m["parent_id"] in seen
        seen.add(m["id"])


async def test_list_messages_of_an_empty_conversation(client, conv, keys, auth):
    r = await client.get(f"/v1/conversations/{conv}/messages", headers=auth(keys.alice))
    assert r.json() == {"items": [], "next_cursor": None}


async def test_list_messages_of_another_scope_is_404(post, client, conv, keys, auth, problem):
    await post({"role": "user", "content": "private"})
    url = f"/v1/conversations/{conv}/messages"
    for headers in (
        auth(keys.bob),
        auth(keys.carol),
        auth(keys.admin, user="bob"),
        auth(keys.other_admin, user="alice"),
    ):
        body = problem(await client.get(url, headers=headers), 404, "not_found")
        assert "private" not in str(body)
    problem(
        await client.get(f"/v1/conversations/{UNKNOWN}/messages", headers=auth(keys.alice)), 404
    )
    r = await client.get(url, headers=auth(keys.admin, user="alice"))
    assert [m["content"] for m in r.json()["items"]] == ["private"]


@pytest.mark.parametrize("params", [{"limit": 0}, {"limit": 501}, {"cursor": "not-ours!"}])
async def test_list_messages_bad_paging_is_422(client, conv, keys, auth, problem, params):
    r = await client.get(
        f"/v1/conversations/{conv}/messages", params=params, headers=auth(keys.alice)
    )
    problem(r, 422, "invalid_input")
