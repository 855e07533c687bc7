"""/v1/conversations: create, list (cursor pages), read, update, delete."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.anyio


async def test_create_returns_201_and_the_conversation(client, keys, auth):
    r = await client.post(
        "/v1/conversations", json={"title": "trip", "metadata": {"k": 1}}, headers=auth(keys.alice)
    )
    assert r.status_code == 201
    assert r.headers["content-type"] == "application/json"
    body = r.json()
    assert body["title"] == "trip"
    assert body["metadata"] == {"k": 1}
    assert body["active_leaf_id"] is None
    assert body["message_count"] == 0
    assert body["agent"] is None
    assert r.headers["location"] == f"/v1/conversations/{body['id']}"

    got = await client.get(f"/v1/conversations/{body['id']}", headers=auth(keys.alice))
    assert got.status_code == 200
    assert got.json() == body


async def test_create_without_a_body(client, keys, auth):
    r = await client.post("/v1/conversations", headers=auth(keys.alice))
    assert r.status_code == 201
    assert r.json()["title"] is None
    assert r.json()["metadata"] == {}


@pytest.mark.parametrize(
    "body",
    [
        {"title": 5},
        {"metadata": "not an object"},
        {"title": "x", "owner": "someone-else"},  # unknown fields are refused, not ignored
        {"title": "x" * 1001},
        [1, 2],
    ],
)
async def test_create_rejects_bad_bodies(client, keys, auth, problem, body):
    r = await client.post("/v1/conversations", json=body, headers=auth(keys.alice))
    problem(r, 422, "invalid_input")


async def test_create_rejects_malformed_json(client, keys, auth, problem):
    headers = {**auth(keys.alice), "Content-Type": "application/json"}
    r = await client.post("/v1/conversations", content=b'{"title": ', headers=headers)
    body = problem(r, 422, "invalid_input")
    assert "JSON" in body["detail"]


async def test_list_walks_every_page_newest_first(client, keys, auth):
    made = []
    for i in range(7):
        r = await client.post(
            "/v1/conversations", json={"title": f"c{i}"}, headers=auth(keys.alice)
        )
        made.append(r.json()["id"])
    seen: list[str] = []
    cursor = None
    pages = 0
    while True:
        params = {"limit": 3} | ({"cursor": cursor} if cursor else {})
        r = await client.get("/v1/conversations", params=params, headers=auth(keys.alice))
        assert r.status_code == 200
        page = r.json()
        assert set(page) == {"items", "next_cursor"}
        assert len(page["items"]) <= 3
        seen += [c["id"] for c in page["items"]]
        pages += 1
        cursor = page["next_cursor"]
        if cursor is None:
            break
        assert pages < 10, "pagination does not end"
    assert pages == 3
    assert seen == made[::-1]


async def test_list_default_page_and_empty(client, keys, auth):
    r = await client.get("/v1/conversations", headers=auth(keys.bob))
    assert r.json() == {"items": [], "next_cursor": None}


@pytest.mark.parametrize(
    "params", [{"limit": 0}, {"limit": 501}, {"limit": "x"}, {"cursor": "%%%"}, {"cursor": "YWJj"}]
)
async def test_list_rejects_bad_paging(client, keys, auth, problem, params):
    r = await client.get("/v1/conversations", params=params, headers=auth(keys.alice))
    problem(r, 422, "invalid_input")


async def test_get_unknown_conversation_is_404(client, keys, auth, problem):
    for cid in ("01900000-0000-7000-8000-000000000000", "not-a-uuid"):
        r = await client.get(f"/v1/conversations/{cid}", headers=auth(keys.alice))
        problem(r, 404, "not_found")


async def test_patch_title_metadata_and_active_leaf(client, keys, auth, problem):
    h = auth(keys.alice)
    cid = (await client.post("/v1/conversations", json={"title": "old"}, headers=h)).json()["id"]
    first = (
        await client.post(
            f"/v1/conversations/{cid}/messages", json={"role": "user", "content": "q"}, headers=h
        )
    ).json()
    second = (
        await client.post(
            f"/v1/conversations/{cid}/messages",
            json={"role": "assistant", "content": "a"},
            headers=h,
        )
    ).json()

    r = await client.patch(
        f"/v1/conversations/{cid}", json={"title": "new", "metadata": {"x": True}}, headers=h
    )
    assert r.status_code == 200
    assert r.json()["title"] == "new"
    assert r.json()["metadata"] == {"x": True}
    assert r.json()["active_leaf_id"] == second["id"]

    r = await client.patch(
        f"/v1/conversations/{cid}", json={"active_leaf_id": first["id"]}, headers=h
    )
    assert r.status_code == 200
    assert r.json()["active_leaf_id"] == first["id"]
    assert r.json()["title"] == "new"  # left out: unchanged
    hist = (await client.get(f"/v1/conversations/{cid}/history", headers=h)).json()
    assert [m["id"] for m in hist["messages"]] == [first["id"]]

    # An unknown leaf is 404 and changes nothing, not even the title sent with it.
    r = await client.patch(
        f"/v1/conversations/{cid}",
        json={"title": "ignored", "active_leaf_id": "01900000-0000-7000-8000-000000000000"},
        headers=h,
    )
    problem(r, 404, "not_found")
    after = (await client.get(f"/v1/conversations/{cid}", headers=h)).json()
    assert after["title"] == "new"
    assert after["active_leaf_id"] == first["id"]

    problem(
        await client.patch(f"/v1/conversations/{cid}", json={"active_leaf_id": None}, headers=h),
        422,
    )
    problem(await client.patch(f"/v1/conversations/{cid}", json={"tenant": "t2"}, headers=h), 422)
    problem(
        await client.patch(
            "/v1/conversations/01900000-0000-7000-8000-000000000000", json={"title": "x"}, headers=h
        ),
        404,
    )


async def test_delete_is_204_then_404(client, keys, auth, problem):
    h = auth(keys.alice)
    cid = (await client.post("/v1/conversations", headers=h)).json()["id"]
    await client.post(
        f"/v1/conversations/{cid}/messages", json={"role": "user", "content": "q"}, headers=h
    )
    r = await client.delete(f"/v1/conversations/{cid}", headers=h)
    assert r.status_code == 204
    assert r.content == b""
    problem(await client.get(f"/v1/conversations/{cid}", headers=h), 404)
    problem(await client.delete(f"/v1/conversations/{cid}", headers=h), 404)
    problem(await client.get(f"/v1/conversations/{cid}/history", headers=h), 404)
