"""REST: the two clocks of facts. ``GET /v1/facts`` lists the facts true now by default;
``as_of``/``known_at`` answer what was true then as known then (or as known now); recall
search and context take ``as_of``; a bad time is a 422 problem."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from pathlib import Path

import pytest

from memstrata import Memory, Scope
from memstrata.config import Settings
from memstrata.storage.records import to_micros
from memstrata.testing import FakeLLM, override

pytestmark = pytest.mark.anyio

ALICE = Scope("t1", "alice")
T0 = datetime(2026, 1, 5, tzinfo=UTC)
T1 = datetime(2026, 2, 1, tzinfo=UTC)
T2 = datetime(2026, 3, 1, tzinfo=UTC)


@pytest.fixture
def store(db_url: str, tmp_path: Path):
    """A second handle on the server's database that runs no jobs, to plant state."""
    mem = Memory.open(db_url, settings=Settings(home=tmp_path, worker="off"))
    with override(mem, facts_embedder=None):
        yield mem
    mem.close()


def _at(mem: Memory, when: datetime) -> None:
    micros = to_micros(when)
    mem.core.rt.clock = lambda: micros


def _supersede_at_t2(store: Memory) -> tuple[str, str, str]:
    """Tea from T0, replaced by coffee at T2. Returns (old id, new id, conversation id)."""
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
        cid = store.conversations.create(ALICE).id
        for when, text in ((T0, "I prefer tea."), (T2, "Now I prefer coffee.")):
            _at(store, when)
            store.messages.append(ALICE, cid, role="user", content=text)
            store.messages.append(ALICE, cid, role="assistant", content="Noted.")
            assert store.longterm.flush(ALICE, cid).outcome == "applied"
    facts = {f.content: f for f in store.facts.list(ALICE, status="all").items}
    return facts["User prefers tea"].id, facts["User prefers coffee"].id, cid


async def test_facts_are_true_now_by_default_and_as_of_answers_the_past(client, keys, auth, store):
    h = auth(keys.alice)
    old, new, cid = _supersede_at_t2(store)

    async def listed(**params: str) -> list[dict]:
        r = await client.get("/v1/facts", params=params, headers=h)
        assert r.status_code == 200, r.text
        return r.json()["items"]

    assert [f["id"] for f in await listed()] == [new]
    [then] = await listed(as_of="2026-02-01T00:00:00Z")
    assert then["id"] == old
    assert then["status"] == "superseded"
    assert then["valid_from"] == "2026-01-05T00:00:00+00:00"
    assert then["valid_to"] == "2026-03-01T00:00:00+00:00"
    assert then["recorded_at"] == "2026-01-05T00:00:00+00:00"
    assert then["superseded_at"] == "2026-03-01T00:00:00+00:00"
    assert [f["id"] for f in await listed(as_of="2026-03-02T00:00:00Z")] == [new]
    # Before anything was known: nothing; as known at T2 about T1: still the old fact.
    assert await listed(as_of="2025-12-01T00:00:00Z") == []
    assert [f["id"] for f in await listed(as_of=T1.isoformat(), known_at=T2.isoformat())] == [old]
    r = await client.get(f"/v1/facts/{new}", headers=h)
    assert r.json()["valid_from"] == "2026-03-01T00:00:00+00:00"
    assert r.json()["valid_to"] is None

    # Search and context as of T1 see only what existed then.
    r = await client.post(
        "/v1/recall/search", json={"query": "coffee tea", "as_of": T1.isoformat()}, headers=h
    )
    assert r.status_code == 200, r.text
    assert "Now I prefer coffee." not in [hit["message"]["content"] for hit in r.json()["hits"]]
    r = await client.post(
        f"/v1/conversations/{cid}/context", json={"as_of": T1.isoformat()}, headers=h
    )
    assert r.status_code == 200, r.text
    blocks = [m["content"] for m in r.json()["messages"] if m["role"] == "system"]
    assert any("User prefers tea" in b for b in blocks)
    assert not any("User prefers coffee" in b for b in blocks)
    r = await client.post(f"/v1/conversations/{cid}/context", json={}, headers=h)
    blocks = [m["content"] for m in r.json()["messages"] if m["role"] == "system"]
    assert any("User prefers coffee" in b for b in blocks)
    assert not any("User prefers tea" in b for b in blocks)


async def test_bad_times_are_422_problems(client, keys, auth, problem):
    h = auth(keys.alice)
    cid = (await client.post("/v1/conversations", json={}, headers=h)).json()["id"]
    for params in ({"as_of": "yesterday"}, {"known_at": "2026-13-01"}):
        problem(await client.get("/v1/facts", params=params, headers=h), 422)
    problem(
        await client.get(
            "/v1/facts", params={"as_of": T1.isoformat(), "status": "removed"}, headers=h
        ),
        422,
    )
    problem(
        await client.post("/v1/recall/search", json={"query": "x", "as_of": "soon"}, headers=h),
        422,
    )
    problem(
        await client.post(f"/v1/conversations/{cid}/context", json={"as_of": "later"}, headers=h),
        422,
    )
