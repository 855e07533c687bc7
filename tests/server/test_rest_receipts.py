"""Deletion receipts over REST, on SQLite and PostgreSQL: every deletion answers 204 with
``X-Memstrata-Receipt``; ``GET /v1/receipts/{rid}`` is scoped (404 for any other scope)."""

from __future__ import annotations

import json
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest

from support import postgres_schema, postgres_url_for

pytestmark = pytest.mark.anyio

HEADER = "X-Memstrata-Receipt"


@pytest.fixture(params=["sqlite", "postgres"])
def db_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{(tmp_path / 'rest.db').as_posix()}"
    else:
        with postgres_schema() as schema:
            yield postgres_url_for(schema)


async def _conversation(client, h, canary: str) -> tuple[str, list[str]]:
    cid = (await client.post("/v1/conversations", json={"title": canary}, headers=h)).json()["id"]
    mids = []
    for role in ("user", "assistant"):
        r = await client.post(
            f"/v1/conversations/{cid}/messages",
            json={"role": role, "content": f"{role} says {canary}"},
            headers=h,
        )
        assert r.status_code == 201, r.text
        mids.append(r.json()["id"])
    return cid, mids


async def _receipt(client, h, response) -> dict:
    assert response.status_code == 204, response.text
    assert response.content == b""
    rid = response.headers[HEADER]
    r = await client.get(f"/v1/receipts/{rid}", headers=h)
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["id"] == rid
    return body


async def test_every_deletion_has_a_receipt_with_counts_and_no_content(client, keys, auth):
    h = auth(keys.alice)
    canary = f"CANARY{uuid.uuid4().hex}"
    cid, (_, a) = await _conversation(client, h, canary)
    fact = await client.post("/v1/facts", json={"content": f"likes {canary}"}, headers=h)
    fid = fact.json()["id"]

    body = await _receipt(client, h, await client.delete(f"/v1/facts/{fid}", headers=h))
    assert (body["kind"], body["subject_ids"], body["tables"]["facts"]) == ("fact", [fid], 1)
    assert body["verified"] is True
    assert body["actor"].startswith("key ")
    assert canary not in json.dumps(body)

    r = await client.delete(f"/v1/conversations/{cid}/messages/{a}", headers=h)
    body = await _receipt(client, h, r)
    assert (body["kind"], body["subject_ids"]) == ("message", [cid, a])
    assert body["tables"]["messages"] == 1
    assert body["verified"] is True
    assert canary not in json.dumps(body)

    body = await _receipt(client, h, await client.delete(f"/v1/conversations/{cid}", headers=h))
    assert (body["kind"], body["subject_ids"], body["user"]) == ("conversation", [cid], "alice")
    assert body["tables"]["conversations"] == 1
    assert body["tables"]["messages"] == 1
    assert body["verified"] is True
    assert body["findings"] == []
    assert canary not in json.dumps(body)


async def test_user_deletion_receipt_is_for_admins_only(client, keys, auth, problem):
    bob = auth(keys.bob)
    canary = f"CANARY{uuid.uuid4().hex}"
    cid, _ = await _conversation(client, bob, canary)
    own = (await client.delete(f"/v1/conversations/{cid}", headers=bob)).headers[HEADER]
    assert (await client.get(f"/v1/receipts/{own}", headers=bob)).status_code == 200
    await _conversation(client, bob, canary)

    r = await client.delete("/v1/users/bob", headers=auth(keys.admin))
    body = await _receipt(client, auth(keys.admin), r)
    assert body["kind"] == "user"
    assert body["subject_ids"][0] == "bob"
    assert body["tables"]["users"] == 1
    assert body["tables"]["conversations"] == 1
    assert body["tables"]["messages"] == 2
    assert body["verified"] is True, body["findings"]
    assert canary not in json.dumps(body)
    rid = r.headers[HEADER]
    # Naming the user, an admin reads all of the user's receipts; another tenant's admin none.
    as_bob = auth(keys.admin, user="bob")
    assert (await client.get(f"/v1/receipts/{rid}", headers=as_bob)).status_code == 200
    assert (await client.get(f"/v1/receipts/{own}", headers=as_bob)).status_code == 200
    problem(await client.get(f"/v1/receipts/{rid}", headers=auth(keys.other_admin)), 404)
    problem(await client.get(f"/v1/receipts/{rid}", headers=auth(keys.admin, user="alice")), 404)


async def test_other_scopes_get_404(client, keys, auth, problem, admin_mem):
    alice = auth(keys.alice)
    cid, _ = await _conversation(client, alice, "x")
    rid = (await client.delete(f"/v1/conversations/{cid}", headers=alice)).headers[HEADER]
    absent = str(uuid.uuid4())
    unknown = problem(await client.get(f"/v1/receipts/{absent}", headers=alice), 404)
    for key in (keys.bob, keys.carol, keys.other_admin):
        body = problem(await client.get(f"/v1/receipts/{rid}", headers=auth(key)), 404)
        # Never told apart from a receipt that does not exist.
        assert json.dumps(body).replace(rid, absent) == json.dumps(unknown)
    # A user key may not name another user; no key, no answer.
    problem(await client.get(f"/v1/receipts/{rid}", headers=auth(keys.bob, user="alice")), 403)
    problem(await client.get(f"/v1/receipts/{rid}"), 401)
    assert (await client.get(f"/v1/receipts/{rid}", headers=auth(keys.admin))).status_code == 200


async def test_failed_deletions_have_no_receipt_header(client, keys, auth, problem):
    r = await client.delete("/v1/conversations/nope", headers=auth(keys.alice))
    problem(r, 404)
    assert HEADER not in r.headers


async def test_receipt_route_is_in_openapi(client):
    doc = (await client.get("/openapi.json")).json()
    assert "/v1/receipts/{rid}" in doc["paths"]
    delete = doc["paths"]["/v1/conversations/{cid}"]["delete"]
    assert HEADER in delete["responses"]["204"]["headers"]
