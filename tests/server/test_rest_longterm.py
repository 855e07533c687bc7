"""REST: /v1/facts (CRUD, history, filters, pagination, validation), /v1/profile, the
isolation of one user's long-term memory from every other caller, and extraction jobs
seen through /v1/jobs."""

from __future__ import annotations

import json
import uuid
from pathlib import Path

import httpx
import pytest

from memstrata import Memory, Scope
from memstrata.config import Settings
from memstrata.longterm.model import PROFILE_SECTIONS
from memstrata.testing import FakeLLM, override

pytestmark = pytest.mark.anyio

ALICE = Scope("t1", "alice")


@pytest.fixture
def store(db_url: str, tmp_path: Path):
    """A second handle on the server's database that runs no jobs, to plant state."""
    mem = Memory.open(db_url, settings=Settings(home=tmp_path, worker="off"))
    with override(mem, facts_embedder=None):  # exact-key dedupe only: no model to load
        yield mem
    mem.close()


async def _add(client, headers, content: str, **fields) -> dict:
    r = await client.post("/v1/facts", json={"content": content, **fields}, headers=headers)
    assert r.status_code == 201, r.text
    return r.json()


def _supersede(store: Memory, scope: Scope) -> tuple[str, str]:
    """Two extractions: the second replaces the first one's fact. Returns (old, new) ids."""
    first = {
        "newFacts": [{"content": "User prefers tea", "category": "preference", "confidence": 0.9}]
    }
    second = {
        "newFacts": [
            {
                "content": "User prefers coffee",
                "category": "preference",
                "confidence": 0.9,
                "supersedes": ["f1"],
                "reason": "changed their mind",
            }
        ]
    }
    with override(store, facts_llm=FakeLLM([json.dumps(first), json.dumps(second)])):
        cid = store.conversations.create(scope).id
        for text in ("I prefer tea.", "Now I prefer coffee."):
            store.messages.append(scope, cid, role="user", content=text)
            store.messages.append(scope, cid, role="assistant", content="Noted.")
            assert store.longterm.flush(scope, cid).outcome == "applied"
    facts = {f.content: f for f in store.facts.list(scope, status="all").items}
    return facts["User prefers tea"].id, facts["User prefers coffee"].id


# -- CRUD ------------------------------------------------------------------------------------


async def test_fact_crud_with_history(client, keys, auth, problem):
    h = auth(keys.alice)
    r = await client.post(
        "/v1/facts",
        json={"content": "User  runs   Postgres 16", "category": "knowledge", "confidence": 0.8},
        headers=h,
    )
    assert r.status_code == 201, r.text
    fact = r.json()
    fid = fact["id"]
    assert r.headers["Location"] == f"/v1/facts/{fid}"
    assert fact["content"] == "User runs Postgres 16"  # whitespace normalised
    assert (fact["category"], fact["confidence"]) == ("knowledge", 0.8)
    assert (fact["status"], fact["origin"], fact["sources"]) == ("active", "manual", [])
    assert fact["superseded_by"] is None

    r = await client.get(f"/v1/facts/{fid}", headers=h)
    assert r.status_code == 200
    assert r.json() == fact

    r = await client.patch(
        f"/v1/facts/{fid}", json={"content": "User runs Postgres 17", "confidence": 0.9}, headers=h
    )
    assert r.status_code == 200, r.text
    edited = r.json()
    assert (edited["id"], edited["content"], edited["confidence"]) == (
        fid,
        "User runs Postgres 17",
        0.9,
    )
    assert edited["category"] == "knowledge"  # left out: unchanged
    r = await client.patch(f"/v1/facts/{fid}", json={"category": "context"}, headers=h)
    assert r.json()["category"] == "context"
    assert r.json()["content"] == "User runs Postgres 17"

    r = await client.get(f"/v1/facts/{fid}/history", headers=h)
    assert r.status_code == 200
    events = r.json()["items"]
    assert [e["event"] for e in events] == ["created", "edited", "edited"]
    assert all(e["fact_id"] == fid for e in events)
    # An "edited" entry keeps the version before the edit.
    assert (events[1]["content"], events[1]["confidence"]) == ("User runs Postgres 16", 0.8)
    assert (events[2]["content"], events[2]["category"]) == ("User runs Postgres 17", "knowledge")

    r = await client.delete(f"/v1/facts/{fid}", headers=h)
    assert r.status_code == 204
    assert r.content == b""
    for method, url in (
        ("GET", f"/v1/facts/{fid}"),
        ("GET", f"/v1/facts/{fid}/history"),
        ("PATCH", f"/v1/facts/{fid}"),
        ("DELETE", f"/v1/facts/{fid}"),
    ):
        body = {"json": {"content": "x"}} if method == "PATCH" else {}
        problem(await client.request(method, url, headers=h, **body), 404, "not_found")
    r = await client.get("/v1/facts", params={"status": "all"}, headers=h)
    assert r.json()["items"] == []


async def test_list_filters_by_status_and_category_and_pages(client, keys, auth, problem, store):
    h = auth(keys.alice)
    old, new = _supersede(store, ALICE)
    manual = [
        (await _add(client, h, f"User owns plant number {i}", category="context"))["id"]
        for i in range(5)
    ]

    async def ids(**params) -> list[str]:
        r = await client.get("/v1/facts", params=params, headers=h)
        assert r.status_code == 200, r.text
        return [f["id"] for f in r.json()["items"]]

    newest_first = [*reversed(manual), new]
    assert await ids() == newest_first  # default: active only
    assert await ids(status="active") == newest_first
    assert await ids(status="superseded") == [old]
    assert await ids(status="removed") == []
    assert set(await ids(status="all")) == {*newest_first, old}
    assert await ids(category="preference") == [new]
    assert await ids(category="preference", status="all") == [new, old]
    r = await client.get(f"/v1/facts/{old}", headers=h)
    assert (r.json()["status"], r.json()["superseded_by"]) == ("superseded", new)
    assert r.json()["origin"] == "extracted"
    assert r.json()["sources"]

    # The history of either fact shows the whole replacement.
    r = await client.get(f"/v1/facts/{new}/history", headers=h)
    events = [(e["fact_id"], e["event"]) for e in r.json()["items"]]
    assert events == [(old, "created"), (new, "created"), (old, "superseded")]
    superseded = r.json()["items"][-1]
    assert (superseded["related_id"], superseded["reason"]) == (new, "changed their mind")

    seen: list[str] = []
    cursor = None
    while True:
        params = {"limit": 2, "status": "all", **({"cursor": cursor} if cursor else {})}
        r = await client.get("/v1/facts", params=params, headers=h)
        body = r.json()
        assert len(body["items"]) <= 2
        seen += [f["id"] for f in body["items"]]
        cursor = body["next_cursor"]
        if cursor is None:
            break
    assert seen == await ids(status="all")
    assert len(seen) == len(set(seen)) == 7

    for params in ({"status": "gone"}, {"category": "hobby"}, {"limit": 0}):
        problem(await client.get("/v1/facts", params=params, headers=h), 422)


async def test_a_duplicate_active_fact_is_409(client, keys, auth, problem):
    h = auth(keys.alice)
    first = await _add(client, h, "User speaks Portuguese")
    body = problem(
        await client.post("/v1/facts", json={"content": "user SPEAKS  portuguese"}, headers=h),
        409,
        "conflict",
    )
    assert first["id"] in body["detail"]
    other = await _add(client, h, "User speaks Spanish")
    problem(
        await client.patch(
            f"/v1/facts/{other['id']}", json={"content": "User speaks Portuguese"}, headers=h
        ),
        409,
    )
    # Another user may hold the same fact; once erased, it may be added again.
    await _add(client, auth(keys.bob), "User speaks Portuguese")
    assert (await client.delete(f"/v1/facts/{first['id']}", headers=h)).status_code == 204
    await _add(client, h, "User speaks Portuguese")


@pytest.mark.parametrize(
    "body",
    [
        {"content": "x", "category": "hobby"},
        {"content": "x", "confidence": 1.5},
        {"content": "x", "confidence": -0.1},
        {"content": "x", "confidence": "high"},
        {"content": "x", "tags": ["a"]},
        {"content": ""},
        {"content": "   "},
        {"category": "preference"},
        {"content": "x" * 2001},
    ],
)
async def test_bad_fact_bodies_are_422_problems(client, keys, auth, problem, body):
    h = auth(keys.alice)
    problem(await client.post("/v1/facts", json=body, headers=h), 422)
    r = await client.get("/v1/facts", params={"status": "all"}, headers=h)
    assert r.json()["items"] == []


@pytest.mark.parametrize(
    "patch",
    [
        {"category": "hobby"},
        {"confidence": 2},
        {"confidence": None},
        {"content": None},
        {"content": ""},
        {"status": "removed"},
        {},
    ],
)
async def test_bad_patches_are_422_problems_and_change_nothing(client, keys, auth, problem, patch):
    h = auth(keys.alice)
    fact = await _add(client, h, "User lives in Porto", category="context", confidence=0.7)
    problem(await client.patch(f"/v1/facts/{fact['id']}", json=patch, headers=h), 422)
    assert (await client.get(f"/v1/facts/{fact['id']}", headers=h)).json() == fact
    r = await client.get(f"/v1/facts/{fact['id']}/history", headers=h)
    assert [e["event"] for e in r.json()["items"]] == ["created"]


async def test_only_active_facts_can_be_edited(client, keys, auth, problem, store):
    old, _ = _supersede(store, ALICE)
    h = auth(keys.alice)
    problem(await client.patch(f"/v1/facts/{old}", json={"content": "x"}, headers=h), 409)
    # ... but any fact can be erased, superseded ones included.
    assert (await client.delete(f"/v1/facts/{old}", headers=h)).status_code == 204


# -- profile ---------------------------------------------------------------------------------


async def test_profile_has_six_sections(client, keys, auth, store):
    h = auth(keys.alice)
    r = await client.get("/v1/profile", headers=h)
    assert r.status_code == 200
    sections = r.json()["sections"]
    assert list(sections) == list(PROFILE_SECTIONS)
    assert all(s == {"summary": "", "updated_at": None} for s in sections.values())

    document = {
        "user": {"workContext": {"summary": "Data engineer."}},
        "history": {"recentMonths": {"summary": "Moved to Porto."}},
    }
    store.longterm.import_memory(ALICE, document)
    sections = (await client.get("/v1/profile", headers=h)).json()["sections"]
    assert list(sections) == list(PROFILE_SECTIONS)
    assert sections["workContext"]["summary"] == "Data engineer."
    assert sections["recentMonths"]["summary"] == "Moved to Porto."
    assert sections["workContext"]["updated_at"] is not None
    assert sections["topOfMind"] == {"summary": "", "updated_at": None}
    bob = (await client.get("/v1/profile", headers=auth(keys.bob))).json()["sections"]
    assert all(s["summary"] == "" for s in bob.values())


async def test_memory_export_is_the_callers_document_and_imports_back(client, keys, auth, store):
    h = auth(keys.alice)
    kept = await _add(client, h, "User keeps bees", category="preference")
    gone = await _add(client, h, "User lives in Lisbon")
    assert (await client.delete(f"/v1/facts/{gone['id']}", headers=h)).status_code == 204
    store.longterm.import_memory(ALICE, {"user": {"workContext": {"summary": "Beekeeper."}}})
    await _add(client, auth(keys.bob), "Bob likes chess")

    r = await client.get("/v1/memory/export", headers=h)
    assert r.status_code == 200
    document = r.json()
    assert document == store.longterm.export(ALICE)
    assert [f["id"] for f in document["facts"]] == [kept["id"]]
    assert document["facts"][0]["content"] == "User keeps bees"
    assert document["user"]["workContext"]["summary"] == "Beekeeper."
    assert "chess" not in r.text  # another user's memory never shows

    # The document is the import format: a fresh user gets the same memory from it.
    carol = Scope("t1", "carol")
    store.longterm.import_memory(carol, document)
    assert [f.content for f in store.facts.list(carol).items] == ["User keeps bees"]
    # An admin key exports the user it names.
    as_admin = await client.get("/v1/memory/export", headers=auth(keys.admin, user="alice"))
    assert as_admin.json() == document


# -- isolation -------------------------------------------------------------------------------


async def test_one_users_facts_are_invisible_to_everyone_else(client, keys, auth, problem, store):
    canary = f"canary-{uuid.uuid4().hex}"
    alice = auth(keys.alice)
    planted = [
        await _add(client, alice, f"User's locker code is {canary}"),
        await _add(
            client, alice, f"User hates {canary} jokes", category="correction", source_error=canary
        ),
    ]
    old, new = _supersede(store, ALICE)
    await client.patch(
        f"/v1/facts/{new}", json={"content": f"User prefers {canary}"}, headers=alice
    )
    store.longterm.import_memory(ALICE, {"user": {"topOfMind": {"summary": f"Plans {canary}"}}})
    ids = [f["id"] for f in planted] + [old, new]

    others = {
        "bob": auth(keys.bob),
        "carol (other tenant)": auth(keys.carol),
        "admin as bob": auth(keys.admin, user="bob"),
        "other tenant's admin as alice": auth(keys.other_admin, user="alice"),
        "admin as alice's agent": auth(keys.admin, user="alice", agent="helper"),
    }
    bodies: list[str] = []

    async def call(method: str, url: str, headers, **kw) -> httpx.Response:
        r = await client.request(method, url, headers=headers, **kw)
        bodies.append(r.text)
        return r

    for name, h in others.items():
        for fid in ids:
            problem(await call("GET", f"/v1/facts/{fid}", h), 404, "not_found")
            problem(await call("GET", f"/v1/facts/{fid}/history", h), 404, "not_found")
            patch = {"content": "taken over"}
            problem(await call("PATCH", f"/v1/facts/{fid}", h, json=patch), 404, "not_found")
            problem(await call("DELETE", f"/v1/facts/{fid}", h), 404, "not_found")
        for status in ("active", "superseded", "removed", "evicted", "all"):
            r = await call("GET", "/v1/facts", h, params={"status": status})
            assert r.status_code == 200, (name, r.text)
            assert not set(ids) & {f["id"] for f in r.json()["items"]}, name
        assert (await call("GET", "/v1/profile", h)).status_code == 200
        # The same content is no duplicate for someone else.
        r = await call("POST", "/v1/facts", h, json={"content": f"User's locker code is {canary}"})
        assert r.status_code == 201, (name, r.text)
        bodies.pop()  # that body is the caller's own new fact, canary included by design
        fid = r.json()["id"]
        assert (await call("DELETE", f"/v1/facts/{fid}", h)).status_code == 204

    leaked = [b for b in bodies if canary in b]
    assert leaked == []
    # Nothing the others tried changed alice's memory.
    r = await client.get("/v1/facts", params={"status": "all"}, headers=alice)
    assert {f["id"] for f in r.json()["items"]} == set(ids)
    assert canary in (await client.get(f"/v1/facts/{new}", headers=alice)).json()["content"]
    assert canary in (await client.get("/v1/profile", headers=alice)).text


async def test_admin_key_acts_as_the_named_user(client, keys, auth, problem):
    as_alice = auth(keys.admin, user="alice")
    made = await _add(client, as_alice, "User is on call this week")
    r = await client.get(f"/v1/facts/{made['id']}", headers=auth(keys.alice))
    assert r.status_code == 200
    assert r.json()["origin"] == "manual"
    own = await _add(client, auth(keys.alice), "User drinks decaf")
    r = await client.get("/v1/facts", headers=as_alice)
    assert [f["id"] for f in r.json()["items"]] == [own["id"], made["id"]]
    r = await client.patch(f"/v1/facts/{own['id']}", json={"confidence": 0.5}, headers=as_alice)
    assert r.json()["confidence"] == 0.5
    assert (await client.get("/v1/profile", headers=as_alice)).status_code == 200

    # A user key may not name another user; an admin key must name one.
    for method, url in (
        ("GET", "/v1/facts"),
        ("GET", f"/v1/facts/{own['id']}"),
        ("GET", f"/v1/facts/{own['id']}/history"),
        ("DELETE", f"/v1/facts/{own['id']}"),
        ("GET", "/v1/profile"),
    ):
        problem(await client.request(method, url, headers=auth(keys.bob, user="alice")), 403)
        problem(await client.request(method, url, headers=auth(keys.alice, user="alice")), 403)
        problem(await client.request(method, url, headers=auth(keys.admin)), 422)
        problem(await client.request(method, url), 401)
    problem(
        await client.post("/v1/facts", json={"content": "x"}, headers=auth(keys.bob, user="alice")),
        403,
    )
    assert (await client.get(f"/v1/facts/{own['id']}", headers=auth(keys.alice))).status_code == 200


# -- jobs ------------------------------------------------------------------------------------


async def test_a_queued_extraction_is_listed_as_blocked_without_an_llm(client, keys, auth, store):
    cid = store.conversations.create(ALICE).id
    store.messages.append(ALICE, cid, role="user", content="I prefer window seats.")
    store.messages.append(ALICE, cid, role="assistant", content="Noted.")
    job = store.longterm.observe(ALICE, cid)

    r = await client.get("/v1/jobs", headers=auth(keys.alice))
    assert r.status_code == 200
    [item] = r.json()["items"]
    assert item["id"] == job.id
    assert (item["kind"], item["status"], item["conversation_id"]) == (
        "longterm.extract",
        "queued",
        cid,
    )
    assert "needs an LLM" in item["blocked"]
    r = await client.get(f"/v1/jobs/{job.id}", headers=auth(keys.alice))
    assert "needs an LLM" in r.json()["blocked"]
    r = await client.get("/v1/jobs", params={"status": "queued"}, headers=auth(keys.admin))
    assert [j["id"] for j in r.json()["items"]] == [job.id]
    assert (await client.get("/v1/jobs", headers=auth(keys.bob))).json()["items"] == []
    r = await client.get("/v1/jobs", headers=auth(keys.admin, user="bob"))
    assert r.json()["items"] == []
