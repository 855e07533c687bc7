"""Prompt provenance over REST, on SQLite and PostgreSQL: record: true, context_id on the
reply's append, GET .../provenance and GET /v1/facts/{fid}/usage."""

from __future__ import annotations

from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest

from support import postgres_schema, postgres_url_for

pytestmark = pytest.mark.anyio


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{(tmp_path / 'rest.db').as_posix()}"
        return
    with postgres_schema() as schema:
        yield postgres_url_for(schema)


async def _setup(client: httpx.AsyncClient, h: dict[str, str]) -> tuple[str, str]:
    """A conversation with a question and a fact; returns (conversation id, fact id)."""
    cid = (await client.post("/v1/conversations", json={}, headers=h)).json()["id"]
    r = await client.post(
        f"/v1/conversations/{cid}/messages",
        json={"role": "user", "content": "Which tea do I like?"},
        headers=h,
    )
    assert r.status_code == 201, r.text
    r = await client.post(
        "/v1/facts", json={"content": "Likes green tea", "category": "preference"}, headers=h
    )
    assert r.status_code == 201, r.text
    return cid, r.json()["id"]


async def _record(client: httpx.AsyncClient, h: dict[str, str], cid: str) -> dict[str, Any]:
    r = await client.post(f"/v1/conversations/{cid}/context", json={"record": True}, headers=h)
    assert r.status_code == 200, r.text
    body: dict[str, Any] = r.json()
    assert isinstance(body["context_id"], str)
    return body


async def test_record_link_provenance_and_usage(
    client: httpx.AsyncClient, keys: Any, auth: Callable[..., dict[str, str]]
) -> None:
    h = auth(keys.alice)
    cid, fid = await _setup(client, h)
    plain = await client.post(f"/v1/conversations/{cid}/context", json={}, headers=h)
    assert "context_id" not in plain.json()
    ctx = await _record(client, h, cid)
    r = await client.post(
        f"/v1/conversations/{cid}/messages",
        json={"role": "assistant", "content": "Green tea.", "context_id": ctx["context_id"]},
        headers=h,
    )
    assert r.status_code == 201, r.text
    mid = r.json()["id"]
    assert "context_id" not in r.json()
    r = await client.get(f"/v1/conversations/{cid}/messages/{mid}/provenance", headers=h)
    assert r.status_code == 200, r.text
    record = r.json()["record"]
    assert record["id"] == ctx["context_id"]
    assert record["reply_id"] == mid
    assert record["report"]["hash"] == ctx["report"]["hash"]
    ids = {(i["kind"], i["id"]) for i in record["items"]}
    assert ("fact", fid) in ids
    assert ("message", ctx["report"]["leaf_id"]) in ids
    assert "Likes green tea" not in r.text
    r = await client.get(f"/v1/facts/{fid}/usage", headers=h)
    assert r.status_code == 200, r.text
    assert r.json()["items"][0]["message_id"] == mid
    assert r.json()["items"][0]["context_id"] == ctx["context_id"]
    assert r.json()["next_cursor"] is None
    # The user question has no record: 200 with record null.
    first = (await client.get(f"/v1/conversations/{cid}/messages", headers=h)).json()["items"][0]
    r = await client.get(f"/v1/conversations/{cid}/messages/{first['id']}/provenance", headers=h)
    assert r.status_code == 200
    assert r.json()["record"] is None


async def test_idempotent_link_and_conflicts(
    client: httpx.AsyncClient,
    keys: Any,
    auth: Callable[..., dict[str, str]],
    problem: Callable[..., dict[str, Any]],
) -> None:
    h = auth(keys.alice)
    cid, _ = await _setup(client, h)
    ctx = await _record(client, h, cid)
    body = {
        "id": "01900000-0000-7000-8000-0000000000aa",
        "role": "assistant",
        "content": "Green tea.",
        "context_id": ctx["context_id"],
    }
    r = await client.post(f"/v1/conversations/{cid}/messages", json=body, headers=h)
    assert r.status_code == 201, r.text
    r = await client.post(f"/v1/conversations/{cid}/messages", json=body, headers=h)
    assert r.status_code == 200, r.text
    other = {"role": "assistant", "content": "Other.", "context_id": ctx["context_id"]}
    r = await client.post(f"/v1/conversations/{cid}/messages", json=other, headers=h)
    problem(r, 409)
    listed = (await client.get(f"/v1/conversations/{cid}/messages", headers=h)).json()["items"]
    assert [m["content"] for m in listed] == ["Which tea do I like?", "Green tea."]
    bad = {"role": "assistant", "content": "x", "context_id": 5}
    problem(await client.post(f"/v1/conversations/{cid}/messages", json=bad, headers=h), 422)
    user = {"role": "user", "content": "x", "context_id": ctx["context_id"]}
    problem(await client.post(f"/v1/conversations/{cid}/messages", json=user, headers=h), 422)


async def test_cross_scope_context_id_is_404(
    client: httpx.AsyncClient,
    keys: Any,
    auth: Callable[..., dict[str, str]],
    problem: Callable[..., dict[str, Any]],
) -> None:
    alice, bob = auth(keys.alice), auth(keys.bob)
    cid, fid = await _setup(client, alice)
    ctx = await _record(client, alice, cid)
    bob_cid, _ = await _setup(client, bob)
    for context_id in (ctx["context_id"], "01900000-0000-7000-8000-00000000dead", "nope"):
        r = await client.post(
            f"/v1/conversations/{bob_cid}/messages",
            json={"role": "assistant", "content": "stolen", "context_id": context_id},
            headers=bob,
        )
        problem(r, 404)
    listed = (await client.get(f"/v1/conversations/{bob_cid}/messages", headers=bob)).json()
    assert [m["content"] for m in listed["items"]] == ["Which tea do I like?"]
    r = await client.post(
        f"/v1/conversations/{cid}/messages",
        json={"role": "assistant", "content": "ok", "context_id": ctx["context_id"]},
        headers=alice,
    )
    mid = r.json()["id"]
    problem(
        await client.get(f"/v1/conversations/{cid}/messages/{mid}/provenance", headers=bob), 404
    )
    problem(await client.get(f"/v1/facts/{fid}/usage", headers=bob), 404)
    problem(await client.get(f"/v1/facts/{fid}/usage", headers=auth(keys.carol)), 404)


async def test_fact_delete_leaves_a_tombstone_and_conversation_delete_removes_records(
    client: httpx.AsyncClient, keys: Any, auth: Callable[..., dict[str, str]], admin_mem: Any
) -> None:
    h = auth(keys.alice)
    cid, fid = await _setup(client, h)
    ctx = await _record(client, h, cid)
    r = await client.post(
        f"/v1/conversations/{cid}/messages",
        json={"role": "assistant", "content": "ok", "context_id": ctx["context_id"]},
        headers=h,
    )
    mid = r.json()["id"]
    assert (await client.delete(f"/v1/facts/{fid}", headers=h)).status_code == 204
    r = await client.get(f"/v1/conversations/{cid}/messages/{mid}/provenance", headers=h)
    (fact,) = [i for i in r.json()["record"]["items"] if i["kind"] == "fact"]
    assert (fact["id"], fact["state"]) == (fid, "deleted")
    assert "green tea" not in r.text.lower()
    r = await client.get(f"/v1/facts/{fid}/usage", headers=h)
    assert [u["message_id"] for u in r.json()["items"]] == [mid]
    assert (await client.delete(f"/v1/conversations/{cid}", headers=h)).status_code == 204
    from support import scalar

    assert scalar(admin_mem, "SELECT count(*) FROM context_records") == 0
    assert scalar(admin_mem, "SELECT count(*) FROM context_record_items") == 0


async def test_the_endpoints_are_in_openapi(client: httpx.AsyncClient) -> None:
    doc = (await client.get("/openapi.json")).json()
    assert "/v1/conversations/{cid}/messages/{mid}/provenance" in doc["paths"]
    assert "/v1/facts/{fid}/usage" in doc["paths"]
    assert "context_id" in doc["components"]["schemas"]["NewMessage"]["properties"]
    assert "record" in doc["components"]["schemas"]["ContextIn"]["properties"]
