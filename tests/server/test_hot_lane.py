"""The hot lane (server/hotlane.py) answers the plain ``GET /healthz`` and history
requests exactly as the whole application does: the same OpenAPI document; the same
status, headers and body, access line and metrics for every request it takes (errors and
a failure inside included); and everything else goes through the application untouched."""

from __future__ import annotations

import logging
from collections.abc import AsyncIterator
from typing import Any

import httpx
import opentelemetry.trace
import pytest
from fastapi import FastAPI

from memstrata import AsyncMemory
from memstrata.config import Settings
from memstrata.server import create_app, hotlane
from memstrata.server.hotlane import HISTORY_PATH, HotLane

pytestmark = pytest.mark.anyio


def _answer(response: httpx.Response) -> tuple[Any, ...]:
    headers = [(k, v) for k, v in response.headers.raw if k.lower() not in (b"date", b"server")]
    return response.status_code, headers, response.content


def _counts(app: FastAPI) -> list[str]:
    """The GET request counters of the app's metrics (the tests make their data through one
    app only, and durations differ from run to run)."""
    text: str = app.state.metrics.render()
    prefix = 'memstrata_http_requests_total{method="GET"'
    return [line for line in text.splitlines() if line.startswith(prefix)]


class Apps:
    def __init__(self, lane: FastAPI, whole: FastAPI, taken: list[str]) -> None:
        self.lane, self.whole, self.taken = lane, whole, taken
        self.clients = [
            httpx.AsyncClient(
                transport=httpx.ASGITransport(app=app, raise_app_exceptions=False),
                base_url="http://memstrata.test",
            )
            for app in (lane, whole)
        ]

    async def both(self, method: str, url: str, **kw: Any) -> tuple[httpx.Response, bool]:
        """The lane app's and the whole app's answers (asserted equal), and whether the
        lane took the request."""
        kw["headers"] = {"X-Request-Id": "same-id", **kw.get("headers", {})}
        before = len(self.taken)
        a = await self.clients[0].request(method, url, **kw)
        b = await self.clients[1].request(method, url, **kw)
        assert _answer(a) == _answer(b), (method, url)
        return a, len(self.taken) > before


@pytest.fixture
async def apps(
    amemory: AsyncMemory, settings: Settings, monkeypatch: pytest.MonkeyPatch
) -> AsyncIterator[Apps]:
    lane_app = create_app(amemory, settings)
    whole_app = create_app(amemory, settings)
    whole_app.lane = None  # type: ignore[attr-defined]
    taken: list[str] = []
    take = HotLane.take

    def recording(self: HotLane, scope: Any) -> bool:
        found = take(self, scope)
        if found:
            taken.append(scope["path"])
        return found

    monkeypatch.setattr(HotLane, "take", recording)
    made = Apps(lane_app, whole_app, taken)
    try:
        yield made
    finally:
        for c in made.clients:
            await c.aclose()


async def test_the_openapi_document_is_the_declared_routes(apps: Apps) -> None:
    a, taken = await apps.both("GET", "/openapi.json")
    assert a.status_code == 200
    assert not taken
    assert HISTORY_PATH in a.json()["paths"]
    assert "/healthz" in a.json()["paths"]


async def test_history_answers_are_the_whole_apps(
    apps: Apps, keys: Any, auth: Any, caplog: pytest.LogCaptureFixture
) -> None:
    alice = auth(keys.alice)
    conv = (await apps.clients[0].post("/v1/conversations", headers=alice, json={})).json()
    cid = conv["id"]
    ids = []
    for i in range(6):
        role = "user" if i % 2 == 0 else "assistant"
        body = {"role": role, "content": f"message {i} " * 20}
        made = await apps.clients[0].post(
            f"/v1/conversations/{cid}/messages", headers=alice, json=body
        )
        ids.append(made.json()["id"])
    base = f"/v1/conversations/{cid}/history"
    plain_requests = [
        base,
        f"{base}?max_tokens=60",
        f"{base}?max_tokens=0&max_messages=none",
        f"{base}?max_messages=1",
        f"{base}?leaf_id={ids[2]}",
        f"{base}?leaf_id=not-a-message",  # 404
        "/v1/conversations/no-such-conversation/history",  # 404
    ]
    plain_keys = [
        auth(keys.bob),  # another user's conversation: 404
        {"Authorization": "Bearer msk_unknown"},  # 401
        {"Authorization": f"bearer {keys.alice}"},  # the scheme in any case
        auth(keys.admin),  # an admin key must name the user: 422
    ]
    handed_on: list[tuple[str, dict[str, str]]] = [
        (base, {}),  # no key
        (base, {"Authorization": f"Basic {keys.alice}"}),
        (base, {"Authorization": "Bearer"}),
        (base, auth(keys.admin, user="alice")),
        (base, auth(keys.alice, user="alice")),  # 403
        (base, {**alice, "Content-Type": "application/json", "Content-Length": "2"}),
        (f"{base}?max_tokens=-1", alice),
        (f"{base}?max_tokens=abc", alice),
        (f"{base}?max_tokens=%2B5", alice),
        (f"{base}?max_messages=0", alice),
        (f"{base}?max_messages=5%0A", alice),
        (f"{base}?max_tokens=5&max_tokens=6", alice),
        (f"{base}?model=gpt-4o", alice),
        (f"{base}?before={ids[4]}", alice),
        (f"{base}?before={ids[4]}&leaf_id={ids[5]}", alice),
        (f"{base}?other=1", alice),
        (f"{base}/", alice),
    ]
    statuses = set()
    caplog.set_level(logging.INFO, logger="memstrata.access")
    requests = [(u, alice) for u in plain_requests] + [(base, k) for k in plain_keys]
    for url, headers in requests:
        caplog.clear()
        a, taken = await apps.both("GET", url, headers={**headers, "X-Request-Id": "same-id"})
        assert taken, url
        statuses.add(a.status_code)
        lines = [
            (r.getMessage(), r.__dict__["route"], r.__dict__["status"]) for r in caplog.records
        ]
        assert len(lines) == 2, url
        assert lines[0] == lines[1], url  # the same access line from both
    assert {200, 401, 404, 422} <= statuses
    for url, headers in handed_on:
        content = b"{}" if "Content-Length" in headers else None
        _, taken = await apps.both(
            "GET", url, headers={**headers, "X-Request-Id": "same-id"}, content=content
        )
        assert not taken, (url, headers)
    # Methods the route does not have are refused the same way (no HEAD added).
    for method in ("HEAD", "POST", "DELETE"):
        a, taken = await apps.both(method, base, headers=alice)
        assert a.status_code == 405
        assert not taken
    assert _counts(apps.lane) == _counts(apps.whole)


async def test_healthz_is_the_whole_apps(apps: Apps) -> None:
    a, taken = await apps.both("GET", "/healthz", headers={"X-Request-Id": "same-id"})
    assert taken
    assert a.json() == {"status": "ok"}
    _, taken = await apps.both("GET", "/healthz?probe=1", headers={"X-Request-Id": "same-id"})
    assert taken
    for method, url in (("HEAD", "/healthz"), ("POST", "/healthz"), ("GET", "/healthz/")):
        _, taken = await apps.both(method, url, headers={"X-Request-Id": "same-id"})
        assert not taken, (method, url)
    assert _counts(apps.lane) == _counts(apps.whole)


async def test_a_failure_inside_is_answered_as_the_whole_app_answers_it(
    apps: Apps, keys: Any, auth: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    alice = auth(keys.alice)
    conv = (await apps.clients[0].post("/v1/conversations", headers=alice, json={})).json()

    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise RuntimeError("a bug")

    monkeypatch.setattr(AsyncMemory, "history", broken)
    headers = {**alice, "X-Request-Id": "same-id"}
    a, taken = await apps.both("GET", f"/v1/conversations/{conv['id']}/history", headers=headers)
    assert taken
    assert a.status_code == 500
    assert a.headers["x-request-id"] == "same-id"
    assert a.json()["code"] == "internal"
    assert _counts(apps.lane) == _counts(apps.whole)


async def test_with_opentelemetry_configured_the_whole_app_answers(
    apps: Apps, monkeypatch: pytest.MonkeyPatch
) -> None:
    # FastAPI's own layer traces requests once a provider is set: the lane leaves them to it.
    monkeypatch.setattr(
        opentelemetry.trace, "get_tracer_provider", opentelemetry.trace.NoOpTracerProvider
    )
    monkeypatch.setattr(hotlane, "_TELEMETRY_LOOK_S", 0.0)
    _, taken = await apps.both("GET", "/healthz")
    assert not taken


async def test_under_a_root_path_the_whole_app_answers(apps: Apps) -> None:
    scope: dict[str, Any] = {
        "type": "http",
        "method": "GET",
        "path": "/api/healthz",
        "root_path": "/api",
        "headers": [],
        "query_string": b"",
    }
    assert apps.lane.lane is not None  # type: ignore[attr-defined]
    assert not apps.lane.lane.take(scope)  # type: ignore[attr-defined]
