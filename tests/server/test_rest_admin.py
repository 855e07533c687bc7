"""/v1/users (admin keys only): list a tenant's users, delete one with everything it owns."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.anyio


async def test_list_users_of_the_admins_tenant_only(client, keys, auth, admin_mem):
    for i in range(5):
        admin_mem.keys.create("t1", user=f"extra{i}")
    seen, cursor = [], None
    for _ in range(10):
        params = {"limit": 2} | ({"cursor": cursor} if cursor else {})
        r = await client.get("/v1/users", params=params, headers=auth(keys.admin))
        assert r.status_code == 200
        page = r.json()
        assert len(page["items"]) <= 2
        assert all(set(u) == {"id", "created_at"} for u in page["items"])
        seen += [u["id"] for u in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert seen == sorted(["alice", "bob", *(f"extra{i}" for i in range(5))])
    other = (await client.get("/v1/users", headers=auth(keys.other_admin))).json()
    assert [u["id"] for u in other["items"]] == ["carol"]


async def test_admin_routes_ignore_no_header_rules(client, keys, auth):
    # The user headers name a scope for user routes; on admin routes they change nothing.
    r = await client.get("/v1/users", headers=auth(keys.admin, user="carol"))
    assert "carol" not in [u["id"] for u in r.json()["items"]]


async def test_delete_user_cascades(client, keys, auth, problem):
    h = auth(keys.bob)
    cid = (await client.post("/v1/conversations", json={"title": "bob's"}, headers=h)).json()["id"]
    await client.post(
        f"/v1/conversations/{cid}/messages", json={"role": "user", "content": "hi"}, headers=h
    )
    r = await client.delete("/v1/users/bob", headers=auth(keys.admin))
    assert r.status_code == 204
    assert r.content == b""
    users = (await client.get("/v1/users", headers=auth(keys.admin))).json()["items"]
    assert "bob" not in [u["id"] for u in users]
    # bob's key went with him, and nothing of his is left for an admin to find.
    problem(await client.get("/v1/conversations", headers=h), 401)
    as_bob = auth(keys.admin, user="bob")
    assert (await client.get("/v1/conversations", headers=as_bob)).json()["items"] == []
    problem(await client.get(f"/v1/conversations/{cid}", headers=as_bob), 404)
    problem(await client.delete("/v1/users/bob", headers=auth(keys.admin)), 404)


@pytest.mark.parametrize("user", ["nobody", "carol", "bad name", "-x"])
async def test_delete_unknown_or_foreign_user_is_404(client, keys, auth, problem, user):
    problem(await client.delete(f"/v1/users/{user}", headers=auth(keys.admin)), 404, "not_found")
    # carol of tenant t2 is untouched
    assert (await client.get("/v1/conversations", headers=auth(keys.carol))).status_code == 200


async def test_list_users_rejects_bad_paging(client, keys, auth, problem):
    problem(await client.get("/v1/users", params={"limit": 0}, headers=auth(keys.admin)), 422)
