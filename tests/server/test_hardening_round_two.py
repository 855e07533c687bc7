"""Issue 28 at the HTTP edge: N3 (job ids checked before queueing), N4 (receipts keep
agents apart), N5 (If-Match with a version no document reaches is 412) and F10 (a cap per
client address on open connections)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from memstrata import Memory, Scope
from support import closed_by_server, connect_to, healthy_again

pytestmark = pytest.mark.anyio


async def test_n3_a_job_id_no_store_holds_is_422_and_nothing_is_queued(
    client, keys, auth, problem, admin_mem: Memory
):
    h = auth(keys.alice)
    cid = (await client.post("/v1/conversations", json={}, headers=h)).json()["id"]
    for bad in ("a\u0000b", "x\ud800y", "not-an-id"):
        body = json.dumps({"leaf_id": bad}).encode()
        for path in ("compact", "observe"):
            r = await client.post(
                f"/v1/conversations/{cid}/{path}",
                content=body,
                headers={**h, "content-type": "application/json"},
            )
            assert r.status_code == 422, (path, bad, r.text)
            problem(r, 422)
    assert admin_mem.jobs.list(tenant="t1").items == []


async def test_n5_if_match_beyond_any_version_is_412(client, keys, auth, problem):
    h = auth(keys.alice)
    cid = (await client.post("/v1/conversations", json={}, headers=h)).json()["id"]
    url = f"/v1/conversations/{cid}/plan"
    assert (await client.put(url, json={"document": {"a": 1}}, headers=h)).status_code == 200
    huge = '"99999999999999999999999"'
    for tag in (huge, '"9223372036854775808"', '"\u00b2"'.encode("latin-1")):
        headers = {**h, "If-Match": tag}
        problem(await client.put(url, json={"document": {}}, headers=headers), 412)
        problem(await client.put("/v1/working-memory", json={"content": "x"}, headers=headers), 412)
    assert (await client.get(url, headers=h)).json()["document"] == {"a": 1}


async def test_n4_receipts_of_an_agent_are_not_its_users(
    client, keys, auth, problem, admin_mem: Memory
):
    agent = Scope("t1", "alice", "helper")
    fact = admin_mem.facts.add(agent, "the agent's fact")
    r = await client.delete(
        f"/v1/facts/{fact.id}", headers=auth(keys.admin, user="alice", agent="helper")
    )
    assert r.status_code == 204
    rid = r.headers["X-Memstrata-Receipt"]
    problem(await client.get(f"/v1/receipts/{rid}", headers=auth(keys.alice)), 404)
    problem(
        await client.get(
            f"/v1/receipts/{rid}", headers=auth(keys.admin, user="alice", agent="other")
        ),
        404,
    )
    for h in (
        auth(keys.admin, user="alice", agent="helper"),
        auth(keys.admin, user="alice"),
        auth(keys.admin),
    ):
        assert (await client.get(f"/v1/receipts/{rid}", headers=h)).json()["agent"] == "helper"
    # The user's own deletions stay theirs to read.
    mine = admin_mem.facts.add(Scope("t1", "alice"), "mine")
    r = await client.delete(f"/v1/facts/{mine.id}", headers=auth(keys.alice))
    rid = r.headers["X-Memstrata-Receipt"]
    assert (await client.get(f"/v1/receipts/{rid}", headers=auth(keys.alice))).status_code == 200
    problem(
        await client.get(
            f"/v1/receipts/{rid}", headers=auth(keys.admin, user="alice", agent="helper")
        ),
        404,
    )


# -- F10: connections per address -------------------------------------------------------------


@pytest.fixture(scope="module", params=["httptools", "h11"])
def capped(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[str]:
    from support import memstrata_serve, server_env

    tmp = tmp_path_factory.mktemp("capped")
    env = server_env(
        home=str(tmp),
        serve_http=request.param,
        serve_max_connections_per_address="2",
        serve_max_connections="50",
        log_format="text",
    )
    with memstrata_serve(f"sqlite:///{tmp / 'capped.db'}", env, tmp / "serve.log", 90) as (_, base):
        yield base


@pytest.mark.server
@pytest.mark.anyio(False)
def test_f10_one_address_cannot_hold_every_connection(capped: str) -> None:
    held = [connect_to(capped) for _ in range(2)]  # an unauthenticated client, silent
    try:
        with connect_to(capped) as third:
            third.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\n\r\n")
            answer = closed_by_server(third)
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 429"), answer
        assert b"retry-after: 1" in head.lower()
        assert b"content-type: application/problem+json" in head.lower()
        assert json.loads(body)["code"] == "rate_limited"
        # Over the cap and silent: dropped (within a second), not held for the usual 10 s.
        with connect_to(capped) as silent:
            assert closed_by_server(silent) == b""
        # Past twice the cap, the address's new connections are closed at once.
        more = [connect_to(capped) for _ in range(2)]
        with connect_to(capped) as flood:
            assert closed_by_server(flood) == b""
        for sock in more:
            sock.close()
    finally:
        for sock in held:
            sock.close()
    assert healthy_again(capped) == 200


def test_f10_the_cap_is_a_setting(tmp_path: Path) -> None:
    from memstrata.config import Settings
    from memstrata.server.serving import ServeLimits

    limits = ServeLimits.from_settings(Settings(serve_max_connections_per_address=7))
    assert limits.max_connections_per_address == 7
    assert ServeLimits.from_settings(Settings()).max_connections_per_address == 100
