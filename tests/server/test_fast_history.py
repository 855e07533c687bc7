"""The plain route for ``GET /v1/conversations/{cid}/history`` (server/fast_history.py)
answers exactly as the declared FastAPI route: the same OpenAPI document, and the same
status, headers and body for plain requests, for every error it answers itself, and for
everything it hands to the declared route."""

from __future__ import annotations

from collections.abc import AsyncIterator
from typing import Any

import httpx
import pytest
from fastapi import FastAPI
from fastapi.routing import APIRoute

from memstrata import AsyncMemory
from memstrata.config import Settings
from memstrata.server import create_app, fast_history
from memstrata.server.fast_history import HISTORY_PATH

pytestmark = pytest.mark.anyio
plain_of = fast_history._plain


def _without_fast_route(app: FastAPI) -> FastAPI:
    app.router.routes[:] = [
        r
        for r in app.router.routes
        if isinstance(r, APIRoute) or getattr(r, "path", "") != HISTORY_PATH
    ]
    return app


def _answer(response: httpx.Response) -> tuple[Any, ...]:
    headers = {k: v for k, v in response.headers.items() if k.lower() not in ("date", "server")}
    return response.status_code, headers, response.content


@pytest.fixture
async def clients(
    amemory: AsyncMemory, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[tuple[httpx.AsyncClient, httpx.AsyncClient, list[str]]]:
    fast_app = create_app(amemory, settings)
    plain_app = _without_fast_route(create_app(amemory, settings))
    # What the plain route hands on to the declared route (the requests it does not answer).
    reached: list[str] = []

    def recording(request: Any) -> Any:
        found = plain_of(request)
        if found is None:
            reached.append(request.url.query)
        return found

    monkeypatch.setattr(fast_history, "_plain", recording)
    made = []
    for app in (fast_app, plain_app):
        transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
        made.append(httpx.AsyncClient(transport=transport, base_url="http://memstrata.test"))
    try:
        yield made[0], made[1], reached
    finally:
        for c in made:
            await c.aclose()


async def test_the_openapi_document_is_the_declared_routes(
    clients: tuple[httpx.AsyncClient, httpx.AsyncClient, list[str]],
) -> None:
    fast, plain, _ = clients
    a, b = await fast.get("/openapi.json"), await plain.get("/openapi.json")
    assert a.status_code == b.status_code == 200
    assert a.json() == b.json()
    assert HISTORY_PATH in a.json()["paths"]


async def test_answers_are_the_declared_routes(
    clients: tuple[httpx.AsyncClient, httpx.AsyncClient, list[str]], keys: Any, auth: Any
) -> None:
    fast, plain, reached = clients
    alice = auth(keys.alice)
    conv = (await fast.post("/v1/conversations", headers=alice, json={})).json()
    cid = conv["id"]
    ids = []
    for i in range(6):
        role = "user" if i % 2 == 0 else "assistant"
        body = {"role": role, "content": f"message {i} " * 20}
        made = await fast.post(f"/v1/conversations/{cid}/messages", headers=alice, json=body)
        ids.append(made.json()["id"])
    base = f"/v1/conversations/{cid}/history"
    plain_requests = [
        ("GET", base, alice),
        ("GET", f"{base}?max_tokens=60", alice),
        ("GET", f"{base}?max_tokens=0&max_messages=none", alice),
        ("GET", f"{base}?max_messages=1", alice),
        ("GET", f"{base}?leaf_id={ids[2]}", alice),
        ("GET", f"{base}?leaf_id=not-a-message", alice),  # 404
        ("GET", "/v1/conversations/no-such-conversation/history", alice),  # 404
        ("GET", base, auth(keys.bob)),  # another user's conversation: 404
        ("GET", base, {"Authorization": "Bearer msk_unknown"}),  # 401
        ("GET", base, auth(keys.admin)),  # an admin key must name the user: 422
    ]
    handed_on = [
        ("GET", base, {}),  # no key
        ("GET", base, {"Authorization": f"Basic {keys.alice}"}),
        ("GET", base, {"Authorization": "Bearer"}),
        ("GET", base, auth(keys.admin, user="alice")),
        ("GET", base, auth(keys.alice, user="alice")),  # 403
        ("GET", f"{base}?max_tokens=-1", alice),
        ("GET", f"{base}?max_tokens=abc", alice),
        ("GET", f"{base}?max_tokens=%2B5", alice),
        ("GET", f"{base}?max_messages=0", alice),
        ("GET", f"{base}?max_messages=5%0A", alice),
        ("GET", f"{base}?max_tokens=5&max_tokens=6", alice),
        ("GET", f"{base}?model=gpt-4o", alice),
        ("GET", f"{base}?before={ids[4]}", alice),
        ("GET", f"{base}?before={ids[4]}&leaf_id={ids[5]}", alice),
        ("GET", f"{base}?other=1", alice),
    ]
    statuses = set()
    for method, url, headers in plain_requests + handed_on:
        headers = {**headers, "X-Request-Id": "same-id-for-both"}
        a = await fast.request(method, url, headers=headers)
        b = await plain.request(method, url, headers=headers)
        assert _answer(a) == _answer(b), url
        statuses.add(a.status_code)
    assert {200, 401, 403, 404, 422} <= statuses
    # Only the requests that are not plain reached the declared route.
    assert len(reached) == len(handed_on)
    # Methods the route does not have are refused the same way (no HEAD added).
    for method in ("HEAD", "POST", "DELETE"):
        a, b = (
            await fast.request(method, base, headers=alice),
            await plain.request(method, base, headers=alice),
        )
        assert (a.status_code, a.headers.get("allow")) == (b.status_code, b.headers.get("allow"))
        assert a.status_code == 405
