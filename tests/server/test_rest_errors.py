"""Every error is application/problem+json: unknown routes, wrong methods, body limits,
validation, and failures (which never show internals)."""

from __future__ import annotations

import httpx
import pytest

from memstrata import AsyncMemory
from memstrata.config import Settings
from memstrata.errors import BackendUnavailable, Corruption
from memstrata.server import create_app

pytestmark = pytest.mark.anyio

SECRET = "s3cr3t-internal-detail"


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("GET", "/nope"),
        ("GET", "/v1"),
        ("POST", "/v1/conversations/x/nothing"),
        ("GET", "/v2/users"),
    ],
)
async def test_unknown_routes_are_404_problems(client, keys, auth, problem, method, path):
    problem(await client.request(method, path, headers=auth(keys.alice)), 404, "not_found")
    problem(await client.request(method, path), 404, "not_found")


@pytest.mark.parametrize(
    ("method", "path"),
    [
        ("PUT", "/v1/conversations"),
        ("DELETE", "/v1/conversations"),
        ("POST", "/v1/conversations/x"),
        ("PUT", "/v1/conversations/x/messages/y"),
        ("POST", "/v1/users"),
        ("POST", "/healthz"),
    ],
)
async def test_wrong_method_is_405_problem(client, keys, auth, problem, method, path):
    r = await client.request(method, path, headers=auth(keys.alice))
    problem(r, 405, "method_not_allowed")
    assert r.headers["allow"]


@pytest.fixture
async def small_client(amemory, db_url):
    app = create_app(amemory, Settings(db=db_url, max_body_bytes=1024))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://memstrata.test") as c:
        yield c


async def test_body_over_the_limit_is_413(small_client, keys, auth, problem):
    h = auth(keys.alice)
    cid = (await small_client.post("/v1/conversations", headers=h)).json()["id"]
    url = f"/v1/conversations/{cid}/messages"
    big = {"role": "user", "content": "x" * 2000}
    problem(await small_client.post(url, json=big, headers=h), 413, "payload_too_large")
    # Even before the key is checked: the body is refused unread.
    problem(await small_client.post(url, json=big), 413)

    async def chunks(n: int):
        for _ in range(n):
            yield b" " * 300  # JSON whitespace, so a short stream is still a valid body
        yield b'{"role": "user", "content": "streamed"}'

    # A chunked body has no Content-Length: it is counted as it arrives.
    r = await small_client.post(
        url, content=chunks(5), headers={**h, "Content-Type": "application/json"}
    )
    problem(r, 413, "payload_too_large")
    r = await small_client.post(
        url, content=chunks(1), headers={**h, "Content-Type": "application/json"}
    )
    assert r.status_code == 201
    assert r.json()["content"] == "streamed"
    # Under the limit, a normal body passes.
    assert (
        await small_client.post(url, json={"role": "user", "content": "ok"}, headers=h)
    ).status_code == 201


async def test_bad_content_length_is_a_problem(app, keys, auth):
    sent: list[dict] = []

    async def receive():
        return {"type": "http.request", "body": b"", "more_body": False}

    async def send(message):
        sent.append(message)

    scope = {
        "type": "http",
        "asgi": {"version": "3.0"},
        "http_version": "1.1",
        "method": "POST",
        "scheme": "http",
        "path": "/v1/conversations",
        "raw_path": b"/v1/conversations",
        "query_string": b"",
        "root_path": "",
        "headers": [(b"content-length", b"abc"), (b"host", b"memstrata.test")],
        "client": ("127.0.0.1", 1),
        "server": ("memstrata.test", 80),
    }
    await app(scope, receive, send)
    start = sent[0]
    assert start["status"] == 400
    assert (b"content-type", b"application/problem+json") in start["headers"]


async def test_unexpected_errors_are_500_without_internals(app, client, problem):
    async def boom() -> None:
        raise RuntimeError(SECRET)

    async def corrupt() -> None:
        raise Corruption(f"page 7 of {SECRET} is damaged")

    async def down() -> None:
        raise BackendUnavailable(f"cannot reach {SECRET}")

    app.add_api_route("/boom", boom)
    app.add_api_route("/corrupt", corrupt)
    app.add_api_route("/down", down)
    r = await client.get("/boom")
    problem(r, 500, "internal")
    assert SECRET not in r.text
    r = await client.get("/corrupt")
    problem(r, 500, "corruption")
    assert SECRET not in r.text
    r = await client.get("/down")
    problem(r, 503, "backend_unavailable")
    assert SECRET not in r.text


async def test_validation_errors_list_the_fields(client, keys, auth, problem):
    cid = (await client.post("/v1/conversations", headers=auth(keys.alice))).json()["id"]
    r = await client.get(
        f"/v1/conversations/{cid}/history", params={"max_tokens": "many"}, headers=auth(keys.alice)
    )
    body = problem(r, 422, "invalid_input")
    assert body["errors"][0]["loc"] == ["query", "max_tokens"]
    r = await client.post(
        f"/v1/conversations/{cid}/messages",
        json={"role": "bard", "content": "x"},
        headers=auth(keys.alice),
    )
    body = problem(r, 422, "invalid_input")
    assert body["field"] == "role"


async def test_a_closed_store_answers_503(db_url, keys, auth, problem):
    mem = AsyncMemory.open(db_url)
    await mem.close()
    app = create_app(mem, Settings(db=db_url))
    transport = httpx.ASGITransport(app=app)
    async with httpx.AsyncClient(transport=transport, base_url="http://memstrata.test") as c:
        problem(await c.get("/readyz"), 503, "backend_unavailable")
        problem(await c.get("/v1/conversations", headers=auth(keys.alice)), 503)
        assert (await c.get("/healthz")).status_code == 200
