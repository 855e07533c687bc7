"""/v1/usage and /v1/budgets: who sees whose usage, grouping, bad periods, budgets holding
jobs back visibly (blocked: budget) until raised."""

from __future__ import annotations

import pytest

from longterm_support import rule_extractor
from memstrata import Memory, Scope
from memstrata.config import Settings
from memstrata.longterm.service import EXTRACT_JOB
from memstrata.storage.plan import write
from memstrata.testing import FakeLLM, override
from memstrata.usage.store import UsageRow, insert_rows
from support import Models

pytestmark = pytest.mark.anyio


def _spend(mem: Memory, tenant: str, user: str, purpose: str, tokens: int) -> None:
    row = UsageRow(
        tenant, user, "", purpose, "m", "llm", 1, 0, tokens, 1, 1000, mem.core.rt.clock()
    )
    mem.core.engine.run(write(lambda: insert_rows([row], [mem.core.rt.make_id()])))


@pytest.fixture
def spent(admin_mem: Memory, keys) -> Memory:
    _spend(admin_mem, "t1", "alice", "extraction", 100)
    _spend(admin_mem, "t1", "alice", "compaction", 10)
    _spend(admin_mem, "t1", "bob", "extraction", 1000)
    _spend(admin_mem, "t2", "carol", "extraction", 5)
    return admin_mem


async def test_a_user_key_sees_only_itself_an_admin_its_tenant(client, keys, auth, spent):
    r = await client.get("/v1/usage", headers=auth(keys.alice))
    assert r.status_code == 200, r.text
    body = r.json()
    assert body["group_by"] == "purpose"
    assert [(i["key"], i["tokens"]) for i in body["items"]] == [
        ("compaction", 11),
        ("extraction", 101),
    ]
    assert body["total"]["tokens"] == 112
    assert body["next_cursor"] is None
    r = await client.get("/v1/usage", params={"group_by": "user"}, headers=auth(keys.alice))
    assert [i["key"] for i in r.json()["items"]] == ["alice"]  # just itself
    r = await client.get("/v1/usage", params={"group_by": "user"}, headers=auth(keys.admin))
    assert [(i["key"], i["tokens"]) for i in r.json()["items"]] == [("alice", 112), ("bob", 1001)]
    r = await client.get("/v1/usage", headers=auth(keys.admin, user="bob"))
    assert [(i["key"], i["tokens"]) for i in r.json()["items"]] == [("extraction", 1001)]
    r = await client.get("/v1/usage", params={"group_by": "user"}, headers=auth(keys.other_admin))
    assert [i["key"] for i in r.json()["items"]] == ["carol"]
    r = await client.get(
        "/v1/usage", params={"group_by": "user", "limit": 1}, headers=auth(keys.admin)
    )
    page = r.json()
    assert [i["key"] for i in page["items"]] == ["alice"]
    assert page["next_cursor"]
    r = await client.get(
        "/v1/usage",
        params={"group_by": "user", "limit": 1, "cursor": page["next_cursor"]},
        headers=auth(keys.admin),
    )
    assert [i["key"] for i in r.json()["items"]] == ["bob"]
    assert r.json()["next_cursor"] is None


async def test_bad_periods_and_headers(client, keys, auth, problem, spent):
    for params in (
        {"from": "last week"},
        {"to": "2026-02-30T00:00:00Z"},
        {"from": "2026-03-01", "to": "2026-01-01"},
        {"group_by": "model"},
        {"cursor": "nope!"},
    ):
        problem(await client.get("/v1/usage", params=params, headers=auth(keys.alice)), 422)
    r = await client.get(
        "/v1/usage", params={"from": "2020-01-01", "to": "2020-02-01"}, headers=auth(keys.alice)
    )
    assert r.json()["items"] == []
    assert r.json()["from"].startswith("2020-01-01")
    problem(await client.get("/v1/usage", headers=auth(keys.alice, user="bob")), 403)
    problem(await client.get("/v1/usage"), 401)
    problem(await client.get("/v1/budgets", headers=auth(keys.alice)), 403)
    problem(
        await client.put(
            "/v1/budgets",
            json={"purpose": "extraction", "daily_tokens": 5},
            headers=auth(keys.alice),
        ),
        403,
    )
    problem(
        await client.put(
            "/v1/budgets",
            json={"purpose": "extraction", "daily_tokens": -1},
            headers=auth(keys.admin),
        ),
        422,
    )
    problem(await client.delete("/v1/budgets/extraction", headers=auth(keys.admin)), 404)


@pytest.fixture
def queue(db_url: str, tmp_path):
    mem = Memory.open(db_url, settings=Settings(home=tmp_path, worker="off"))
    with override(mem, facts_llm=FakeLLM(rule_extractor)):
        yield mem
    mem.close()


async def test_a_budget_of_zero_holds_extraction_back_visibly(
    client, keys, auth, amemory, queue, models: Models
):
    models(amemory, facts_llm=FakeLLM(rule_extractor))  # the server could run it
    r = await client.put(
        "/v1/budgets", json={"purpose": "extraction", "daily_tokens": 0}, headers=auth(keys.admin)
    )
    assert r.status_code == 200, r.text
    assert r.json()["exhausted"] is True
    assert r.json()["daily_tokens"] == 0
    job = queue.jobs.enqueue(Scope("t1", "alice"), EXTRACT_JOB, key="k1")
    other = queue.jobs.enqueue(Scope("t2", "carol"), EXTRACT_JOB, key="k2")
    r = await client.get("/v1/jobs", headers=auth(keys.alice))
    [item] = r.json()["items"]
    assert (item["id"], item["status"], item["blocked"]) == (job.id, "queued", "budget")
    r = await client.get(f"/v1/jobs/{job.id}", headers=auth(keys.admin))
    assert r.json()["blocked"] == "budget"
    r = await client.get(f"/v1/jobs/{other.id}", headers=auth(keys.other_admin))
    assert r.json()["blocked"] is None  # another tenant's budget
    r = await client.get("/v1/budgets", headers=auth(keys.admin))
    assert [(b["purpose"], b["exhausted"]) for b in r.json()["items"]] == [("extraction", True)]
    r = await client.get("/v1/budgets", headers=auth(keys.other_admin))
    assert r.json()["items"] == []

    r = await client.put(
        "/v1/budgets",
        json={"purpose": "extraction", "daily_tokens": 10_000},
        headers=auth(keys.admin),
    )
    assert r.json()["exhausted"] is False
    r = await client.get("/v1/jobs", headers=auth(keys.alice))
    assert r.json()["items"][0]["blocked"] is None
    r = await client.delete("/v1/budgets/extraction", headers=auth(keys.admin))
    assert r.status_code == 204
