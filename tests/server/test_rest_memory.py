"""REST: /v1/memory/health, /v1/memory/consolidate and consolidation revert — a dry run
changes nothing, an applied consolidation is undone through supersession and both steps
show in the fact history, another user's facts never show, the job path (202, seen in
/v1/jobs), the model-planned default, input checks, and the remote client."""

from __future__ import annotations

import json
from collections.abc import Iterator
from typing import Any

import anyio
import httpx
import pytest

from memstrata import AsyncMemory, Scope
from memstrata.client import AsyncRemoteMemory
from memstrata.testing import FakeLLM, override
from support import Models

pytestmark = pytest.mark.anyio

CANARY_BOB = "canary-bob-31d9"


@pytest.fixture(autouse=True)
def _word_similarity(amemory: AsyncMemory) -> Iterator[None]:
    with override(amemory, facts_llm=None, facts_embedder=None):  # no model to load
        yield


async def _add(client: httpx.AsyncClient, headers: dict[str, str], content: str) -> str:
    r = await client.post("/v1/facts", json={"content": content}, headers=headers)
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


async def _state(client: httpx.AsyncClient, headers: dict[str, str]) -> list[Any]:
    r = await client.get("/v1/facts", params={"status": "all", "limit": 500}, headers=headers)
    out = []
    for fact in r.json()["items"]:
        h = await client.get(f"/v1/facts/{fact['id']}/history", headers=headers)
        out.append((fact, h.json()))
    return out


async def _plant(client: httpx.AsyncClient, headers: dict[str, str]) -> tuple[str, str]:
    keep = await _add(client, headers, "User prefers dark roast coffee")
    dup = await _add(client, headers, "user prefers dark-roast coffee!")
    await _add(client, headers, "User lives in Berlin")
    await _add(client, headers, "User lives in Paris")
    return keep, dup


async def test_dry_run_apply_and_revert(client, keys, auth, problem) -> None:
    alice = auth(keys.alice)
    keep, dup = await _plant(client, alice)
    before = await _state(client, alice)
    r = await client.post("/v1/memory/consolidate", headers=alice)
    assert r.status_code == 200, r.text
    plan = r.json()
    assert plan["dry_run"] is True
    assert plan["applied"] is False
    assert plan["mode"] == "deterministic"
    (change,) = plan["changes"]
    assert change["target_id"] == keep
    assert [f["id"] for f in change["superseded"]] == [dup]
    assert await _state(client, alice) == before

    r = await client.post("/v1/memory/consolidate", json={"dry_run": False}, headers=alice)
    assert r.status_code == 200, r.text
    applied = r.json()
    assert applied["applied"] is True
    fact = (await client.get(f"/v1/facts/{dup}", headers=alice)).json()
    assert fact["status"] == "superseded"
    assert fact["superseded_by"] == keep

    url = f"/v1/memory/consolidations/{applied['id']}/revert"
    problem(await client.post(url, headers=auth(keys.bob)), 404, "not_found")
    r = await client.post(url, headers=alice)
    assert r.status_code == 200, r.text
    assert r.json() == {"consolidation_id": applied["id"], "restored": [dup], "retired": []}
    fact = (await client.get(f"/v1/facts/{dup}", headers=alice)).json()
    assert fact["status"] == "active"
    events = (await client.get(f"/v1/facts/{dup}/history", headers=alice)).json()["items"]
    assert [e["event"] for e in events] == ["created", "superseded", "restored"]
    problem(await client.post(url, headers=alice), 404, "not_found")


async def test_health_shows_the_callers_facts_only(client, keys, auth) -> None:
    alice = auth(keys.alice)
    await _plant(client, alice)
    bob = auth(keys.bob)
    await _add(client, bob, f"User prefers dark roast coffee {CANARY_BOB}")
    await _add(client, bob, f"User prefers dark roast coffee! {CANARY_BOB}")
    r = await client.get("/v1/memory/health", params={"examples": 50}, headers=alice)
    assert r.status_code == 200, r.text
    body = r.json()
    assert CANARY_BOB not in r.text
    assert body["sizes"]["active"] == 4
    assert body["duplicates"]["count"] == 1
    assert body["contradictions"]["count"] == 1
    assert body["usage_known"] is True  # prompt provenance counts the uses
    assert body["unused"]["count"] == 4  # no recorded context holds any of them
    r = await client.post("/v1/memory/consolidate", headers=alice)
    assert CANARY_BOB not in r.text
    # An admin key acts for the user it names, and sees that user's report.
    admin = auth(keys.admin, user="bob")
    r = await client.get("/v1/memory/health", headers=admin)
    assert r.json()["duplicates"]["count"] == 1
    assert CANARY_BOB in r.text


async def test_background_apply_is_a_job(client, keys, auth, amemory) -> None:
    alice = auth(keys.alice)
    _, dup = await _plant(client, alice)
    body = {"dry_run": False, "background": True}
    r = await client.post("/v1/memory/consolidate", json=body, headers=alice)
    assert r.status_code == 202, r.text
    job = r.json()["job"]
    assert job["kind"] == "longterm.consolidate"
    listed = (await client.get("/v1/jobs", headers=alice)).json()["items"]
    assert job["id"] in {j["id"] for j in listed}
    await amemory.jobs.run_pending(["longterm.consolidate"])
    with anyio.fail_after(30):  # the in-process worker may have taken it first
        while (await client.get(f"/v1/jobs/{job['id']}", headers=alice)).json()["status"] != "done":
            await anyio.sleep(0.05)
    fact = (await client.get(f"/v1/facts/{dup}", headers=alice)).json()
    assert fact["status"] == "superseded"
    r = await client.post(f"/v1/memory/consolidations/{job['id']}/revert", headers=alice)
    assert r.status_code == 200
    assert r.json()["restored"] == [dup]


async def test_a_configured_model_plans_and_applies_in_the_background(
    client, keys, auth, amemory, models: Models
) -> None:
    alice = auth(keys.alice)
    await _plant(client, alice)
    llm = FakeLLM(
        [json.dumps({"merges": [], "supersede": [{"old": "f3", "by": "f4"}]})], cycle=True
    )
    models(amemory, facts_llm=llm)
    r = await client.post("/v1/memory/consolidate", headers=alice)
    plan = r.json()
    assert plan["mode"] == "llm"
    assert llm.calls[-1].purpose == "consolidation"
    (change,) = plan["changes"]
    assert change["kind"] == "supersede"
    assert change["content"] == "User lives in Paris"
    r = await client.post("/v1/memory/consolidate", json={"dry_run": False}, headers=alice)
    assert r.status_code == 202
    assert r.json()["job"]["kind"] == "longterm.consolidate"


async def test_bad_input(client, keys, auth, problem) -> None:
    alice = auth(keys.alice)
    problem(await client.post("/v1/memory/consolidate", json={"dry_run": "x"}, headers=alice), 422)
    problem(await client.post("/v1/memory/consolidate", json={"nope": 1}, headers=alice), 422)
    problem(await client.get("/v1/memory/health?stale_days=-1", headers=alice), 422)
    problem(await client.get("/v1/memory/health?examples=51", headers=alice), 422)
    problem(await client.post("/v1/memory/consolidations/x/revert", headers=alice), 422)
    problem(await client.get("/v1/memory/health"), 401)


async def test_remote_client(app, keys, client) -> None:
    alice = {"Authorization": f"Bearer {keys.alice}"}
    _, dup = await _plant(client, alice)
    transport = httpx.ASGITransport(app=app)
    remote = AsyncRemoteMemory("http://memstrata.test", keys.alice, transport=transport)
    try:
        scope = Scope("t1", "alice")
        report = await remote.memory.health(scope)
        assert report.duplicates.count == 1
        assert report.sizes.active == 4
        assert report.duplicates.examples[0].facts[1].id == dup
        plan = await remote.memory.consolidate(scope)
        assert plan.dry_run
        assert plan.changes[0].superseded[0].id == dup
        applied = await remote.memory.consolidate(scope, dry_run=False)
        assert applied.applied
        undone = await remote.memory.revert(scope, applied.id)
        assert undone.restored == (dup,)
        job = await remote.memory.schedule_consolidation(scope)
        assert job.kind == "longterm.consolidate"
        assert job.tenant == "t1"
    finally:
        await remote.aclose()
