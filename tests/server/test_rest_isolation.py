"""Isolation over REST: every scope plants a canary; no other scope's canary may appear
in any response it gets, and another scope's ids answer 404 everywhere.

Scopes: two tenants with two users each (one user name shared by both tenants,
to catch a tenant left out of a filter), plus an agent scope of one user.
"""

from __future__ import annotations

import uuid
from dataclasses import dataclass, field

import pytest

pytestmark = pytest.mark.anyio


@dataclass
class Planted:
    name: str
    headers: dict[str, str]
    canary: str
    conversations: list[str] = field(default_factory=list)
    messages: dict[str, list[str]] = field(default_factory=dict)  # conversation -> message ids
    bodies: list[str] = field(default_factory=list)


async def _plant(client, p: Planted) -> None:
    """Two conversations with the canary in titles, metadata, contents, tool calls and a branch."""
    c = p.canary
    for n in range(2):
        r = await client.post(
            "/v1/conversations",
            json={"title": f"title {c} {n}", "metadata": {"note": c, "n": n}},
            headers=p.headers,
        )
        assert r.status_code == 201, r.text
        cid = r.json()["id"]
        url = f"/v1/conversations/{cid}/messages"

        async def add(body, url=url):
            r = await client.post(url, json=body, headers=p.headers)
            assert r.status_code == 201, r.text
            return r.json()["id"]

        ids = [await add({"role": "system", "content": f"system {c}"})]
        q = await add({"role": "user", "content": f"question {c}", "metadata": {"m": c}})
        ids.append(q)
        call = {"id": f"call_{n}", "type": "function", "function": {"name": "f", "arguments": c}}
        ids.append(await add({"role": "assistant", "content": "", "tool_calls": [call]}))
        ids.append(await add({"role": "tool", "content": f"tool {c}", "tool_call_id": f"call_{n}"}))
        ids.append(await add({"role": "assistant", "content": f"regen {c}", "parent_id": q}))
        pending = await add(
            {"role": "assistant", "content": "", "status": "pending", "parent_id": q}
        )
        r = await client.patch(f"{url}/{pending}", json={"content": f"late {c}"}, headers=p.headers)
        assert r.status_code == 200, r.text
        ids.append(pending)
        p.conversations.append(cid)
        p.messages[cid] = ids


async def _read_everything(client, p: Planted) -> None:
    """Every read the scope can make, each body kept for the canary search."""

    async def get(url, **params):
        r = await client.get(url, params=params, headers=p.headers)
        assert r.status_code == 200, (url, r.text)
        p.bodies.append(r.text)
        return r.json()

    cursor = None
    listed = []
    for _ in range(10):
        page = await get("/v1/conversations", limit=1, **({"cursor": cursor} if cursor else {}))
        listed += [c["id"] for c in page["items"]]
        cursor = page["next_cursor"]
        if cursor is None:
            break
    assert sorted(listed) == sorted(p.conversations)
    for cid in p.conversations:
        await get(f"/v1/conversations/{cid}")
        leaves = await get(f"/v1/conversations/{cid}/leaves", limit=1)
        while leaves["next_cursor"]:
            leaves = await get(
                f"/v1/conversations/{cid}/leaves", limit=1, cursor=leaves["next_cursor"]
            )
        await get(f"/v1/conversations/{cid}/history")
        for mid in p.messages[cid]:
            await get(f"/v1/conversations/{cid}/messages/{mid}")
            await get(f"/v1/conversations/{cid}/history", leaf_id=mid, max_tokens=100000)


async def _guess(client, p: Planted, other: Planted, problem) -> None:
    """Every way of naming another scope's data answers 404."""
    h = p.headers
    own = p.conversations[0]
    own_leaf = p.messages[own][-1]
    answers = []
    for cid in other.conversations:
        base = f"/v1/conversations/{cid}"
        answers += [
            await client.get(base, headers=h),
            await client.patch(base, json={"title": "stolen"}, headers=h),
            await client.get(f"{base}/leaves", headers=h),
            await client.get(f"{base}/history", headers=h),
            await client.post(f"{base}/messages", json={"role": "user", "content": "x"}, headers=h),
            await client.delete(base, headers=h),
        ]
        for mid in other.messages[cid]:
            answers += [
                await client.get(f"{base}/messages/{mid}", headers=h),
                await client.patch(f"{base}/messages/{mid}", json={"content": "x"}, headers=h),
                # Another scope's message through one's own conversation.
                await client.get(f"/v1/conversations/{own}/messages/{mid}", headers=h),
                await client.get(
                    f"/v1/conversations/{own}/history", params={"leaf_id": mid}, headers=h
                ),
                await client.patch(
                    f"/v1/conversations/{own}", json={"active_leaf_id": mid}, headers=h
                ),
                await client.post(
                    f"/v1/conversations/{own}/messages",
                    json={"role": "user", "content": "x", "parent_id": mid},
                    headers=h,
                ),
            ]
    for r in answers:
        p.bodies.append(r.text)
        problem(r, 404, "not_found")
    # The failed writes changed nothing of one's own.
    conv = (await client.get(f"/v1/conversations/{own}", headers=h)).json()
    assert conv["active_leaf_id"] == own_leaf
    assert conv["title"].startswith("title ")
    # Replaying another scope's message id neither reveals nor touches it: ids are per
    # conversation, so the id is simply unused here (finding 12 of issue 21).
    for cid in other.conversations:
        for mid in other.messages[cid]:
            r = await client.post(
                f"/v1/conversations/{own}/messages",
                json={"id": mid, "role": "user", "content": "x", "parent_id": own_leaf},
                headers=h,
            )
            p.bodies.append(r.text)
            assert r.status_code == 201, r.text
            assert (r.json()["id"], r.json()["conversation_id"]) == (mid, own)
            theirs = await client.get(
                f"/v1/conversations/{cid}/messages/{mid}", headers=other.headers
            )
            assert theirs.status_code == 200
            assert theirs.json()["content"] != "x"
            await client.delete(f"/v1/conversations/{own}/messages/{mid}", headers=h)
    conv = (await client.get(f"/v1/conversations/{own}", headers=h)).json()
    assert conv["active_leaf_id"] == own_leaf


async def test_no_scope_sees_another_scopes_data(client, admin_mem, auth, problem):
    def canary(tag: str) -> str:
        return f"CANARY-{tag}-{uuid.uuid4().hex}"

    k = {
        (t, u): admin_mem.keys.create(t, user=u)[1]
        for t, u in [("t1", "alice"), ("t1", "bob"), ("t2", "alice"), ("t2", "carol")]
    }
    admin1 = admin_mem.keys.create("t1", admin=True)[1]
    admin2 = admin_mem.keys.create("t2", admin=True)[1]
    scopes = [
        Planted("t1/alice", auth(k[("t1", "alice")]), canary("t1-alice")),
        Planted("t1/bob", auth(k[("t1", "bob")]), canary("t1-bob")),
        Planted("t2/alice", auth(k[("t2", "alice")]), canary("t2-alice")),
        Planted("t2/carol", auth(k[("t2", "carol")]), canary("t2-carol")),
        Planted("t1/alice/helper", auth(admin1, user="alice", agent="helper"), canary("agent")),
    ]
    for p in scopes:
        await _plant(client, p)
    for p in scopes:
        await _read_everything(client, p)
        for other in scopes:
            if other is not p:
                await _guess(client, p, other, problem)

    # Admins: users of their own tenant only, and no way to another tenant's users.
    admins = [
        Planted("admin t1", auth(admin1), canary("admin1")),
        Planted("admin t2", auth(admin2), canary("admin2")),
    ]
    users1 = (await client.get("/v1/users", headers=admins[0].headers)).json()
    users2 = (await client.get("/v1/users", headers=admins[1].headers)).json()
    assert [u["id"] for u in users1["items"]] == ["alice", "bob"]
    assert [u["id"] for u in users2["items"]] == ["alice", "carol"]
    admins[0].bodies.append(str(users1))
    admins[1].bodies.append(str(users2))
    problem(await client.delete("/v1/users/carol", headers=admins[0].headers), 404)
    # t1's admin acting as "carol" (unknown in t1) finds nothing of t2's carol.
    as_carol = auth(admin1, user="carol")
    r = await client.get("/v1/conversations", headers=as_carol)
    assert r.json()["items"] == []
    for cid in scopes[3].conversations:
        problem(await client.get(f"/v1/conversations/{cid}", headers=as_carol), 404)
    # The plain user scope of an agent's user sees nothing of the agent scope and back.
    as_alice = auth(admin1, user="alice")
    listed = (await client.get("/v1/conversations", headers=as_alice)).json()["items"]
    assert sorted(c["id"] for c in listed) == sorted(scopes[0].conversations)

    for p in scopes:
        text = "\n".join(p.bodies)
        assert p.canary in text  # the search looked at real data
        for other in scopes:
            if other is not p:
                assert other.canary not in text, f"{other.name} leaked to {p.name}"
    for a in admins:
        text = "\n".join(a.bodies)
        for other in scopes:
            assert other.canary not in text

    # Nothing of anyone was changed or deleted by the others' attempts.
    for p in scopes:
        for cid in p.conversations:
            r = await client.get(f"/v1/conversations/{cid}", headers=p.headers)
            assert r.status_code == 200
            assert r.json()["title"].startswith(f"title {p.canary}")
            assert r.json()["message_count"] == len(p.messages[cid])
