"""Keys on every request: 401, 403 for user keys with admin headers or on admin routes,
admin keys naming the user, keys made elsewhere working at once and keys revoked elsewhere
refused within the key cache's time (at once for users deleted through the server)."""

from __future__ import annotations

import pytest

pytestmark = pytest.mark.anyio


@pytest.mark.parametrize(
    "headers",
    [
        {},
        {"Authorization": "Bearer msk_000000000000_nope"},
        {"Authorization": "Bearer "},
        {"Authorization": "Basic dXNlcjpwYXNz"},
        {"Authorization": "msk_000000000000_nope"},
    ],
)
@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/v1/conversations"),
        ("POST", "/v1/conversations"),
        ("GET", "/v1/conversations/01900000-0000-7000-8000-000000000000/history"),
        ("GET", "/v1/users"),
        ("DELETE", "/v1/users/alice"),
    ],
)
async def test_missing_or_unknown_key_is_401(client, keys, problem, headers, method, path):
    r = await client.request(method, path, headers=headers)
    problem(r, 401, "unauthorized")
    assert r.headers["www-authenticate"] == "Bearer"


async def test_user_key_acts_as_its_user(client, keys, auth):
    await client.post("/v1/conversations", json={"title": "alice's"}, headers=auth(keys.alice))
    mine = (await client.get("/v1/conversations", headers=auth(keys.alice))).json()["items"]
    bobs = (await client.get("/v1/conversations", headers=auth(keys.bob))).json()["items"]
    assert [c["title"] for c in mine] == ["alice's"]
    assert bobs == []


@pytest.mark.parametrize(
    "extra",
    [
        {"X-Memstrata-User": "bob"},
        {"X-Memstrata-User": "alice"},  # even naming itself
        {"X-Memstrata-Agent": "helper"},
        {"X-Memstrata-User": ""},
    ],
)
async def test_user_key_with_admin_headers_is_403(client, keys, auth, problem, extra):
    r = await client.get("/v1/conversations", headers={**auth(keys.alice), **extra})
    problem(r, 403, "forbidden")
    r = await client.post("/v1/conversations", headers={**auth(keys.alice), **extra})
    problem(r, 403, "forbidden")
    assert (await client.get("/v1/conversations", headers=auth(keys.alice))).json()["items"] == []


async def test_user_key_on_admin_routes_is_403(client, keys, auth, problem):
    problem(await client.get("/v1/users", headers=auth(keys.alice)), 403, "forbidden")
    problem(await client.delete("/v1/users/bob", headers=auth(keys.alice)), 403, "forbidden")
    # bob is still there
    r = await client.get("/v1/users", headers=auth(keys.admin))
    assert "bob" in [u["id"] for u in r.json()["items"]]


async def test_admin_key_needs_the_user_header_on_user_routes(client, keys, auth, problem):
    body = problem(await client.get("/v1/conversations", headers=auth(keys.admin)), 422)
    assert "X-Memstrata-User" in body["detail"]
    body = problem(
        await client.post("/v1/conversations", headers=auth(keys.admin, agent="helper")), 422
    )
    assert "X-Memstrata-User" in body["detail"]


@pytest.mark.parametrize("bad", ["", "-starts-with-dash", "has space", "x" * 129])
async def test_admin_with_an_invalid_user_or_agent_name_is_422(client, keys, auth, problem, bad):
    problem(await client.get("/v1/conversations", headers=auth(keys.admin, user=bad)), 422)
    problem(
        await client.get("/v1/conversations", headers=auth(keys.admin, user="alice", agent=bad)),
        422,
    )


async def test_admin_key_acts_as_the_named_user_and_agent(client, keys, auth):
    await client.post("/v1/conversations", json={"title": "plain"}, headers=auth(keys.alice))
    as_alice = auth(keys.admin, user="alice")
    titles = [
        c["title"]
        for c in (await client.get("/v1/conversations", headers=as_alice)).json()["items"]
    ]
    assert titles == ["plain"]

    as_agent = auth(keys.admin, user="alice", agent="helper")
    r = await client.post("/v1/conversations", json={"title": "agent's"}, headers=as_agent)
    assert r.status_code == 201
    assert r.json()["agent"] == "helper"
    agent_titles = [
        c["title"]
        for c in (await client.get("/v1/conversations", headers=as_agent)).json()["items"]
    ]
    assert agent_titles == ["agent's"]
    # The agent's conversation belongs to its own scope, not to the plain user's.
    mine = (await client.get("/v1/conversations", headers=auth(keys.alice))).json()["items"]
    assert [c["title"] for c in mine] == ["plain"]
    problem_status = (
        await client.get(f"/v1/conversations/{r.json()['id']}", headers=auth(keys.alice))
    ).status_code
    assert problem_status == 404


async def test_admin_of_another_tenant_sees_nothing_of_this_one(client, keys, auth):
    await client.post("/v1/conversations", json={"title": "t1"}, headers=auth(keys.alice))
    r = await client.get("/v1/conversations", headers=auth(keys.other_admin, user="alice"))
    assert r.status_code == 200
    assert r.json()["items"] == []


async def test_new_key_works_at_once_and_revoked_key_fails_within_the_cache_time(
    client, admin_mem, auth, problem, app, monkeypatch
):
    clock = [1000.0]
    monkeypatch.setattr(app.state.key_cache, "_clock", lambda: clock[0])
    key, secret = admin_mem.keys.create("t9", user="zed")
    r = await client.post("/v1/conversations", json={"title": "z"}, headers=auth(secret))
    assert r.status_code == 201
    admin_mem.keys.revoke(key.id)  # elsewhere: this server still holds the key it checked
    ttl = app.state.key_cache.ttl_s
    clock[0] += ttl * 0.5
    assert (await client.get("/v1/conversations", headers=auth(secret))).status_code == 200
    clock[0] += ttl * 0.5
    problem(await client.get("/v1/conversations", headers=auth(secret)), 401)


async def test_keys_are_looked_up_every_time_with_the_cache_off(amemory, admin_mem, auth, problem):
    import httpx

    from memstrata.config import Settings
    from memstrata.server import create_app

    app = create_app(amemory, Settings(db=amemory.core.settings.db, key_cache_s=0))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://test") as client:
        key, secret = admin_mem.keys.create("t9", user="zed")
        r = await client.post("/v1/conversations", json={"title": "z"}, headers=auth(secret))
        assert r.status_code == 201
        admin_mem.keys.revoke(key.id)
        problem(await client.get("/v1/conversations", headers=auth(secret)), 401)


async def test_a_user_deleted_through_the_server_is_refused_at_once(
    client, admin_mem, auth, problem
):
    _, admin = admin_mem.keys.create("t9", admin=True)
    _, secret = admin_mem.keys.create("t9", user="zed")
    assert (await client.get("/v1/conversations", headers=auth(secret))).status_code == 200
    r = await client.delete("/v1/users/zed", headers=auth(admin))
    assert r.status_code == 204
    problem(await client.get("/v1/conversations", headers=auth(secret)), 401)
