"""Operations over REST: request ids into logs and jobs, metrics that move, rate limits,
key rotation and expiry."""

from __future__ import annotations

import json
import logging
import re
from datetime import UTC, datetime, timedelta
from typing import Any

import anyio
import httpx
import pytest

from memstrata import AsyncMemory, Memory
from memstrata.config import Settings
from memstrata.logs import JsonFormatter
from memstrata.server import create_app
from memstrata.testing import FakeLLM
from support import Models

pytestmark = pytest.mark.anyio


def _value(text: str, name: str, labels: str = "") -> float:
    found = re.search(rf"^{re.escape(name + labels)} (\S+)$", text, re.M)
    return 0.0 if found is None else float(found.group(1))


async def test_request_ids_are_returned_and_follow_into_jobs_and_their_logs(
    client, keys, auth, admin_mem, amemory, caplog
):
    r = await client.get("/healthz")
    generated = r.headers["X-Request-Id"]
    assert re.fullmatch(r"[0-9a-f-]{36}", generated)
    r = await client.get("/healthz", headers={"X-Request-Id": "trace-42"})
    assert r.headers["X-Request-Id"] == "trace-42"
    r = await client.get("/healthz", headers={"X-Request-Id": "bad id\twith spaces"})
    assert r.headers["X-Request-Id"] != "bad id\twith spaces"

    caplog.set_level(logging.INFO, logger="memstrata")
    h = auth(keys.alice)
    cid = (await client.post("/v1/conversations", headers=h)).json()["id"]
    for i in range(3):
        await client.post(
            f"/v1/conversations/{cid}/messages",
            headers=h,
            json={"role": "user" if i % 2 == 0 else "assistant", "content": f"m{i} " * 400},
        )
    r = await client.post(
        f"/v1/conversations/{cid}/compact", headers={**h, "X-Request-Id": "req-compact-1"}, json={}
    )
    assert r.status_code == 202
    job_id = r.json()["job"]["id"]
    job = admin_mem.jobs.get(job_id)
    assert job.request_id == "req-compact-1"
    await amemory.jobs.run_pending()
    # A worker thread of the memory may have claimed the job first: wait until it is done
    # (and so has logged), whoever ran it.
    for _ in range(300):
        if admin_mem.jobs.get(job_id).status == "done":
            break
        await anyio.sleep(0.05)
    records = [r for r in caplog.records if getattr(r, "request_id", None) == "req-compact-1"]
    kinds = {r.name for r in records}
    assert "memstrata.access" in kinds  # the request's own access line
    assert "memstrata.jobs" in kinds  # and its job's lines, in the worker
    line = json.loads(JsonFormatter().format(records[-1]))
    assert line["request_id"] == "req-compact-1"


async def test_metrics_move_with_requests_jobs_and_model_calls(
    client, keys, auth, amemory, models: Models
):
    before = (await client.get("/metrics")).text
    h = auth(keys.alice)
    cid = (await client.post("/v1/conversations", headers=h)).json()["id"]
    await client.post(
        f"/v1/conversations/{cid}/messages",
        headers=h,
        json={"role": "user", "content": "I like tea"},
    )
    await client.post(
        f"/v1/conversations/{cid}/messages", headers=h, json={"role": "assistant", "content": "ok"}
    )
    queued = _value(before, "memstrata_jobs", '{status="queued"}')
    from memstrata import Scope

    await amemory.longterm.observe(Scope("t1", "alice"), cid)
    models(amemory, facts_llm=FakeLLM(['{"newFacts": []}']), facts_embedder=None)
    after_queue = (await client.get("/metrics")).text
    assert _value(after_queue, "memstrata_jobs", '{status="queued"}') == queued + 1
    await amemory.longterm.flush(Scope("t1", "alice"), cid)
    after = (await client.get("/metrics")).text
    assert _value(after, "memstrata_llm_calls_total", '{purpose="longterm"}') == 1
    assert _value(after, "memstrata_llm_prompt_tokens_total", '{purpose="longterm"}') > 100
    route = 'method="POST",route="/v1/conversations/{cid}/messages",status="201"'
    assert _value(after, "memstrata_http_requests_total", "{" + route + "}") == 2


async def test_rate_limit_answers_429_with_retry_after(db_url, keys, auth, problem):
    settings = Settings(db=db_url, rate_limit_per_second=0.5, rate_limit_burst=3)
    mem = AsyncMemory.open(db_url)
    app = create_app(mem, settings)
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://t") as c:
            codes = [
                (await c.get("/v1/conversations", headers=auth(keys.alice))).status_code
                for _ in range(3)
            ]
            assert codes == [200, 200, 200]
            r = await c.get("/v1/conversations", headers=auth(keys.alice))
            body = problem(r, 429, "rate_limited")
            assert int(r.headers["Retry-After"]) >= 1
            assert "rate limit" in body["detail"]
            # Buckets are per key: another key is not affected.
            assert (await c.get("/v1/conversations", headers=auth(keys.bob))).status_code == 200
    finally:
        mem.core.close()


def test_local_buckets_refill_at_the_rate() -> None:
    from memstrata.server.ratelimit import LocalBuckets

    b = LocalBuckets(rate=2.0, burst=2)
    assert [b.take("k", now=0.0) for _ in range(3)] == [0.0, 0.0, 0.5]
    assert b.take("k", now=0.5) == 0.0  # one token back after 0.5 s
    assert b.take("k", now=0.5) == pytest.approx(0.5)


def _cache_clock(app: Any, monkeypatch: pytest.MonkeyPatch) -> list[float]:
    """The server's key cache on a clock the test moves."""
    now = [1000.0]
    monkeypatch.setattr(app.state.key_cache, "_clock", lambda: now[0])
    return now


async def test_a_rotated_key_stops_working_within_the_key_cache_time(
    client, app, monkeypatch, admin_mem: Memory, auth, problem
):
    now = _cache_clock(app, monkeypatch)
    key, old = admin_mem.keys.create("t1", user="dave", label="laptop")
    assert (await client.get("/v1/conversations", headers=auth(old))).status_code == 200
    new_key, new = admin_mem.keys.rotate(key.id)
    assert (new_key.tenant, new_key.user, new_key.label) == ("t1", "dave", "laptop")
    now[0] += app.state.key_cache.ttl_s
    problem(await client.get("/v1/conversations", headers=auth(old)), 401)
    assert (await client.get("/v1/conversations", headers=auth(new))).status_code == 200
    with pytest.raises(Exception, match="no live key"):
        admin_mem.keys.rotate(key.id)


async def test_an_expired_key_is_refused(
    client, app, monkeypatch, admin_mem: Memory, amemory, auth, problem
):
    now = _cache_clock(app, monkeypatch)
    _, secret = admin_mem.keys.create(
        "t1", user="erin", expires_at=datetime.now(UTC) + timedelta(hours=1)
    )
    assert (await client.get("/v1/conversations", headers=auth(secret))).status_code == 200
    later = amemory.core.rt.clock() + 2 * 3600 * 1_000_000
    amemory.core.rt.clock = lambda: later  # the server two hours on
    now[0] += 2 * 3600
    problem(await client.get("/v1/conversations", headers=auth(secret)), 401)
    with pytest.raises(Exception, match="future"):
        admin_mem.keys.create("t1", user="erin", expires_at=datetime.now(UTC) - timedelta(1))


async def test_redis_buckets_are_shared_between_limiters() -> None:
    """Two replicas (two limiters) draw from one bucket per key in Redis."""
    import uuid

    from memstrata.server.ratelimit import RedisBuckets
    from support import redis_client

    client = redis_client()  # skips naming the Redis server when it is down (fails in CI)
    a = RedisBuckets(client, rate=0.5, burst=2, prefix=f"test:{uuid.uuid4().hex}:")
    b = RedisBuckets(client, rate=0.5, burst=2, prefix=a._prefix)
    assert a.take("k") == 0.0
    assert b.take("k") == 0.0
    wait = a.take("k")
    assert 0 < wait <= 2.0  # the third take of a burst of two waits for a refill
    assert b.take("other") == 0.0
