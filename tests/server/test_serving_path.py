"""The request path does each piece of work once: an append's body is decoded once (at the
edge, strictly), and a known key is looked up once per cache period, not per request."""

from __future__ import annotations

from typing import Any

import pytest

from memstrata import strictjson

pytestmark = pytest.mark.anyio


def _count_decodes(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    calls = [0]
    real = strictjson.loads

    def counting(data: Any, **kw: Any) -> Any:
        calls[0] += 1
        return real(data, **kw)

    monkeypatch.setattr(strictjson, "loads", counting)
    monkeypatch.setattr("memstrata.server.limits.loads", counting)
    return calls


async def test_an_append_body_is_decoded_once(client, keys, auth, monkeypatch) -> None:
    r = await client.post("/v1/conversations", json={"title": "t"}, headers=auth(keys.alice))
    cid = r.json()["id"]
    calls = _count_decodes(monkeypatch)
    r = await client.post(
        f"/v1/conversations/{cid}/messages",
        json={"role": "user", "content": "hello"},
        headers=auth(keys.alice),
    )
    assert r.status_code == 201
    assert calls[0] == 1


async def test_an_append_without_a_json_type_is_still_decoded_strictly(
    client, keys, auth, problem
) -> None:
    r = await client.post("/v1/conversations", json={"title": "t"}, headers=auth(keys.alice))
    cid = r.json()["id"]
    r = await client.post(
        f"/v1/conversations/{cid}/messages",
        content=b'{"role": "user", "content": "x", "metadata": {"a": NaN}}',
        headers={**auth(keys.alice), "Content-Type": "text/plain"},
    )
    problem(r, 422)


async def test_a_known_key_is_looked_up_once_per_cache_period(
    client, keys, auth, amemory, monkeypatch
) -> None:
    lookups = [0]
    real = amemory.keys.authenticate

    async def counting(secret: str) -> Any:
        lookups[0] += 1
        return await real(secret)

    monkeypatch.setattr(amemory.keys, "authenticate", counting)
    for _ in range(5):
        assert (await client.get("/v1/conversations", headers=auth(keys.alice))).status_code == 200
    assert lookups[0] == 1
    for _ in range(3):  # unknown keys are never cached: each one is looked up
        r = await client.get("/v1/conversations", headers=auth("msk_000000000000_nope"))
        assert r.status_code == 401
    assert lookups[0] == 4
