"""/v1/jobs: scoped listing, one job, retry of dead letters."""

from __future__ import annotations

import pytest

from memstrata import Memory, Scope
from memstrata.config import Settings

pytestmark = pytest.mark.anyio


@pytest.fixture
def queue(db_url: str, tmp_path):
    """A handle with no worker of its own, to plant jobs and make dead letters."""
    mem = Memory.open(db_url, settings=Settings(home=tmp_path, worker="off"))
    mem.core.worker()._backoff = lambda attempts: 0
    yield mem
    mem.close()


def _dead(queue: Memory, scope: Scope) -> str:
    def boom(job, m):
        raise RuntimeError("extraction failed: model timeout")

    queue.jobs.register("extract", boom)
    job = queue.jobs.enqueue(scope, "extract", payload={"canary": scope.user}, max_attempts=1)
    queue.jobs.run_pending(kinds=["extract"])
    return job.id


async def test_user_sees_own_jobs_admin_sees_tenant(client, keys, auth, queue):
    a = queue.jobs.enqueue(Scope("t1", "alice"), "noop", delay_s=3600, max_wait_s=3600).id
    b = queue.jobs.enqueue(Scope("t1", "bob"), "noop", delay_s=3600, max_wait_s=3600).id
    c = queue.jobs.enqueue(Scope("t2", "carol"), "noop", delay_s=3600, max_wait_s=3600).id
    r = await client.get("/v1/jobs", headers=auth(keys.alice))
    assert r.status_code == 200
    assert [j["id"] for j in r.json()["items"]] == [a]
    r = await client.get("/v1/jobs", headers=auth(keys.admin))
    assert {j["id"] for j in r.json()["items"]} == {a, b}
    r = await client.get("/v1/jobs", headers=auth(keys.admin, user="bob"))
    assert [j["id"] for j in r.json()["items"]] == [b]
    r = await client.get("/v1/jobs", headers=auth(keys.other_admin))
    assert [j["id"] for j in r.json()["items"]] == [c]
    r = await client.get(f"/v1/jobs/{b}", headers=auth(keys.alice))
    assert r.status_code == 404
    r = await client.get(f"/v1/jobs/{a}", headers=auth(keys.alice))
    assert r.json()["status"] == "queued"


async def test_dead_letters_are_listed_and_retried(client, keys, auth, queue, problem):
    jid = _dead(queue, Scope("t1", "alice"))
    r = await client.get("/v1/jobs", params={"status": "dead"}, headers=auth(keys.alice))
    [job] = r.json()["items"]
    assert job["id"] == jid
    assert "model timeout" in job["last_error"]
    # Users see what failed, not the server's traceback (file paths); operators see both.
    assert "Traceback" not in job["last_error"]
    r = await client.get(f"/v1/jobs/{jid}", headers=auth(keys.admin, user="alice"))
    assert "Traceback (most recent call last)" in r.json()["last_error"]
    assert job["attempts"] == 1
    problem(await client.post(f"/v1/jobs/{jid}/retry", headers=auth(keys.bob)), 404)
    problem(await client.post(f"/v1/jobs/{jid}/retry", headers=auth(keys.other_admin)), 404)
    r = await client.post(f"/v1/jobs/{jid}/retry", headers=auth(keys.alice))
    assert r.status_code == 200
    assert r.json()["status"] == "queued"
    assert r.json()["attempts"] == 0
    problem(await client.post(f"/v1/jobs/{jid}/retry", headers=auth(keys.alice)), 409)


async def test_bad_status_and_user_key_headers(client, keys, auth, problem):
    problem(await client.get("/v1/jobs", params={"status": "nope"}, headers=auth(keys.alice)), 422)
    problem(await client.get("/v1/jobs", headers=auth(keys.alice, user="bob")), 403)
    problem(await client.get("/v1/jobs"), 401)
