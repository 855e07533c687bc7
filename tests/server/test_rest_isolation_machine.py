"""Isolation over REST, explored by a state machine: three tenants of three users each
(the same user names in every tenant, to catch a filter that forgets the tenant) drive
random operations through user keys, or through their tenant's admin key naming the
user in ``X-Memstrata-User``.

Every text a scope writes carries that scope's canary (``canary-t1-u2-7``). After every
request two things must hold: the body the caller got names no canary of another
(tenant, user), and an id of another scope's object answers 404, exactly like an id that
does not exist (never 403, never 200). A model of who owns which id lets the machine aim
operations at other scopes' objects on purpose.
"""

from __future__ import annotations

import itertools
import re
import shutil
import tempfile
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import httpx
from fastapi.testclient import TestClient
from hypothesis import settings
from hypothesis import strategies as st
from hypothesis.stateful import RuleBasedStateMachine, initialize, precondition, rule

from memstrata import AsyncMemory, Memory
from memstrata.config import Settings
from memstrata.server import create_app

TENANTS = ("t1", "t2", "t3")
USERS = ("u1", "u2", "u3")
SCOPES = tuple((t, u) for t in TENANTS for u in USERS)
CANARY = re.compile(r"canary-(t\d)-(u\d)-\d+")
PROBLEM_JSON = "application/problem+json"
# Small name spaces, so that two scopes often pick the same checkpoint or node name.
NAMES = ("plan-a", "plan-b")
APPS = ("app1", "app2")
NODES = ("n1", "n2")

Scope = tuple[str, str]


@dataclass(frozen=True)
class Actor:
    """Who sends a request: a scope, through its own key or its tenant's admin key."""

    scope: Scope
    via_admin: bool


actors = st.builds(Actor, st.sampled_from(SCOPES), st.booleans())


class RestIsolation(RuleBasedStateMachine):
    """Random REST traffic of nine scopes; see the module docstring for the invariants."""

    def __init__(self) -> None:
        super().__init__()
        self.dir = Path(tempfile.mkdtemp(prefix="memstrata-iso-"))
        url = f"sqlite:///{(self.dir / 'rest.db').as_posix()}"
        # No worker: queued jobs stay queued, so every run sees the same job states.
        config = Settings(db=url, blobs="memory://", worker="off")
        self.amemory = AsyncMemory.open(settings=config)
        keys_mem = Memory.open(url)
        try:
            self.user_keys = {s: keys_mem.keys.create(s[0], user=s[1])[1] for s in SCOPES}
            self.admin_keys = {t: keys_mem.keys.create(t, admin=True)[1] for t in TENANTS}
        finally:
            keys_mem.close()
        app = create_app(self.amemory, config)
        self.client = TestClient(app, base_url="http://memstrata.test")
        self.client.__enter__()
        self.counter = itertools.count(1)
        # The model: who owns what, and what each scope expects to find.
        self.convs: dict[str, Scope] = {}
        self.deleted_convs: set[str] = set()
        self.titles: dict[str, str] = {}
        self.counts: dict[str, int] = {}
        self.msgs: dict[str, tuple[Scope, str]] = {}  # message -> (owner, conversation)
        self.facts: dict[str, Scope] = {}
        self.erased_facts: set[str] = set()
        self.jobs: dict[str, Scope] = {}
        self.job_convs: dict[str, str | None] = {}  # a conversation's jobs go with it
        self.plans: set[str] = set()
        self.user_working: set[Scope] = set()
        self.conv_working: set[str] = set()
        self.checkpoints: set[tuple[Scope, str, str]] = set()
        self.requests = 0

    def teardown(self) -> None:
        try:
            self.client.__exit__(None, None, None)
            self.amemory.core.close()
        finally:
            shutil.rmtree(self.dir, ignore_errors=True)

    # -- helpers ---------------------------------------------------------------------------

    def canary(self, scope: Scope) -> str:
        return f"canary-{scope[0]}-{scope[1]}-{next(self.counter)}"

    def headers(self, actor: Actor) -> dict[str, str]:
        if actor.via_admin:
            return {
                "Authorization": f"Bearer {self.admin_keys[actor.scope[0]]}",
                "X-Memstrata-User": actor.scope[1],
            }
        return {"Authorization": f"Bearer {self.user_keys[actor.scope]}"}

    def call(
        self, actor: Actor, method: str, url: str, *, expect: set[int], **kwargs: Any
    ) -> httpx.Response:
        """Send one request and check the invariants every answer must keep."""
        r = self.client.request(method, url, headers=self.headers(actor), **kwargs)
        self.requests += 1
        where = f"{actor} {method} {url} {kwargs} -> {r.status_code}"
        for m in CANARY.finditer(r.text):
            assert (m.group(1), m.group(2)) == actor.scope, (
                f"leak of {m.group(0)}: {where}\n{r.text}"
            )
        for name, value in r.headers.items():
            assert not CANARY.search(value), f"leak in header {name}: {where}"
        assert r.status_code in expect, f"{where}, expected {sorted(expect)}\n{r.text}"
        if r.status_code >= 400:
            assert r.headers["content-type"].startswith(PROBLEM_JSON), where
            if r.status_code == 404:
                assert r.json()["code"] == "not_found", r.text
        return r

    def live(self, cid: str, scope: Scope) -> bool:
        return self.convs.get(cid) == scope and cid not in self.deleted_convs

    def as_owner(self, data: st.DataObject, actor: Actor, owner: Scope) -> Actor:
        """Half the time the owner itself acts (through the same kind of key), so that
        reads and writes that should succeed are exercised as often as refusals."""
        if data.draw(st.booleans(), label="owner acts"):
            return Actor(owner, actor.via_admin)
        return actor

    def pick_conv(self, data: st.DataObject, actor: Actor) -> tuple[Actor, str] | None:
        """A known conversation (mostly a live one) and who acts on it."""
        if not self.convs:
            return None
        live = sorted(c for c in self.convs if c not in self.deleted_convs)
        pool = live if live and data.draw(st.booleans(), label="live") else sorted(self.convs)
        cid = data.draw(st.sampled_from(pool), label="cid")
        return self.as_owner(data, actor, self.convs[cid]), cid

    def pick_msg(self, data: st.DataObject, cid: str | None = None) -> str | None:
        """A known message, of ``cid`` if it has one and the draw says so."""
        if not self.msgs:
            return None
        inside = sorted(m for m, (_, c) in self.msgs.items() if c == cid)
        if inside and data.draw(st.booleans(), label="same conversation"):
            return data.draw(st.sampled_from(inside), label="mid")
        return data.draw(st.sampled_from(sorted(self.msgs)), label="mid")

    def expect_conv(self, cid: str, actor: Actor, ok: int = 200) -> set[int]:
        return {ok} if self.live(cid, actor.scope) else {404}

    def msg_ok(self, mid: str, cid: str, actor: Actor) -> bool:
        owner, at = self.msgs[mid]
        return owner == actor.scope and at == cid and self.live(cid, actor.scope)

    # -- conversations and messages --------------------------------------------------------

    @initialize(actor=actors)
    def first_conversation(self, actor: Actor) -> None:
        self.create_conversation(actor)

    @rule(actor=actors)
    def create_conversation(self, actor: Actor) -> None:
        title = f"title {self.canary(actor.scope)}"
        r = self.call(
            actor,
            "POST",
            "/v1/conversations",
            json={"title": title, "metadata": {"note": self.canary(actor.scope)}},
            expect={201},
        )
        cid = r.json()["id"]
        assert cid not in self.convs
        self.convs[cid] = actor.scope
        self.titles[cid] = title
        self.counts[cid] = 0

    @rule(actor=actors, data=st.data(), parent=st.sampled_from(["after", "root", "known"]))
    def append_message(self, actor: Actor, data: st.DataObject, parent: str) -> None:
        picked = self.pick_conv(data, actor)
        if picked is None:
            return
        actor, cid = picked
        body: dict[str, Any] = {"role": "user", "content": f"says {self.canary(actor.scope)}"}
        expect = self.expect_conv(cid, actor, 201)
        if parent == "root":
            body["parent_id"] = None
        elif parent == "known":
            mid = self.pick_msg(data, cid)
            if mid is None:
                return
            body["parent_id"] = mid
            if not self.msg_ok(mid, cid, actor):
                expect = {404}
        r = self.call(actor, "POST", f"/v1/conversations/{cid}/messages", json=body, expect=expect)
        if r.status_code == 201:
            self.msgs[r.json()["id"]] = (actor.scope, cid)
            self.counts[cid] += 1

    @rule(actor=actors, data=st.data())
    def replay_message_id(self, actor: Actor, data: st.DataObject) -> None:
        """Appending with a known message's id: its owner's replay with other content is a
        409, and another scope's id collides the same way without naming or showing anything."""
        picked = self.pick_conv(data, actor)
        mid = self.pick_msg(data)
        if picked is None or mid is None:
            return
        actor, cid = picked
        body = {"id": mid, "role": "user", "content": f"again {self.canary(actor.scope)}"}
        # An id freed by its conversation's deletion can be used again.
        taken = self.msgs[mid][1] not in self.deleted_convs
        expect = ({409} if taken else {201}) if self.live(cid, actor.scope) else {404}
        r = self.call(actor, "POST", f"/v1/conversations/{cid}/messages", json=body, expect=expect)
        if r.status_code == 201:
            self.msgs[mid] = (actor.scope, cid)
            self.counts[cid] += 1

    @rule(actor=actors, data=st.data())
    def read_conversation(self, actor: Actor, data: st.DataObject) -> None:
        picked = self.pick_conv(data, actor)
        if picked is None:
            return
        actor, cid = picked
        base = f"/v1/conversations/{cid}"
        expect = self.expect_conv(cid, actor)
        r = self.call(actor, "GET", base, expect=expect)
        if r.status_code == 200:
            # Nobody else's attempts changed it.
            assert r.json()["title"] == self.titles[cid]
            assert r.json()["message_count"] == self.counts[cid]
        self.call(actor, "GET", f"{base}/leaves", params={"limit": 500}, expect=expect)
        self.call(actor, "GET", f"{base}/messages", params={"limit": 500}, expect=expect)
        self.call(actor, "GET", f"{base}/history", expect=expect)
        self.call(actor, "POST", f"{base}/context", json={"query": "canary"}, expect=expect)

    @rule(actor=actors, data=st.data())
    def read_message(self, actor: Actor, data: st.DataObject) -> None:
        picked = self.pick_conv(data, actor)
        if picked is None:
            return
        actor, cid = picked
        mid = self.pick_msg(data, cid)
        if mid is None:
            return
        base = f"/v1/conversations/{cid}"
        expect = {200} if self.msg_ok(mid, cid, actor) else {404}
        self.call(actor, "GET", f"{base}/messages/{mid}", expect=expect)
        self.call(actor, "GET", f"{base}/history", params={"leaf_id": mid}, expect=expect)
        body = {"leaf_id": mid, "query": "canary"}
        self.call(actor, "POST", f"{base}/context", json=body, expect=expect)

    @rule(actor=actors)
    def list_conversations(self, actor: Actor) -> None:
        r = self.call(actor, "GET", "/v1/conversations", params={"limit": 500}, expect={200})
        listed = {c["id"] for c in r.json()["items"]}
        assert listed == {c for c in self.convs if self.live(c, actor.scope)}

    @rule(actor=actors, data=st.data(), with_leaf=st.booleans())
    def patch_conversation(self, actor: Actor, data: st.DataObject, with_leaf: bool) -> None:
        picked = self.pick_conv(data, actor)
        if picked is None:
            return
        actor, cid = picked
        title = f"renamed {self.canary(actor.scope)}"
        body: dict[str, Any] = {"title": title}
        expect = self.expect_conv(cid, actor)
        if with_leaf:
            mid = self.pick_msg(data, cid)
            if mid is None:
                return
            body["active_leaf_id"] = mid
            if not self.msg_ok(mid, cid, actor):
                expect = {404}
        r = self.call(actor, "PATCH", f"/v1/conversations/{cid}", json=body, expect=expect)
        if r.status_code == 200:
            self.titles[cid] = title

    @rule(actor=actors, data=st.data())
    def delete_conversation(self, actor: Actor, data: st.DataObject) -> None:
        picked = self.pick_conv(data, actor)
        if picked is None:
            return
        actor, cid = picked
        r = self.call(
            actor, "DELETE", f"/v1/conversations/{cid}", expect=self.expect_conv(cid, actor, 204)
        )
        if r.status_code == 204:
            self.deleted_convs.add(cid)
            self.plans.discard(cid)
            self.conv_working.discard(cid)

    @rule(actor=actors, data=st.data(), scoped=st.sampled_from(["none", "conversation", "leaf"]))
    def recall_search(self, actor: Actor, data: st.DataObject, scoped: str) -> None:
        body: dict[str, Any] = {"query": "canary says title", "k": 50}
        expect = {200}
        if scoped != "none":
            picked = self.pick_conv(data, actor)
            if picked is None:
                return
            actor, cid = picked
            body["conversation_id"] = cid
            expect = self.expect_conv(cid, actor)
            if scoped == "leaf":
                mid = self.pick_msg(data, cid)
                if mid is None:
                    return
                body["leaf_id"] = mid
                body["message_range"] = 2
                expect = {200} if self.msg_ok(mid, cid, actor) else {404}
        r = self.call(actor, "POST", "/v1/recall/search", json=body, expect=expect)
        if r.status_code == 200:
            for hit in r.json()["hits"]:
                assert self.convs.get(hit["conversation_id"]) == actor.scope, hit

    @rule(actor=actors, data=st.data())
    def compact(self, actor: Actor, data: st.DataObject) -> None:
        """Queues a job, so the job routes have ids of several scopes to be aimed at."""
        picked = self.pick_conv(data, actor)
        if picked is None:
            return
        actor, cid = picked
        expect = self.expect_conv(cid, actor, 202)
        r = self.call(actor, "POST", f"/v1/conversations/{cid}/compact", json={}, expect=expect)
        if r.status_code == 202:
            self.jobs[r.json()["job"]["id"]] = actor.scope
            self.job_convs[r.json()["job"]["id"]] = cid

    # -- jobs ------------------------------------------------------------------------------

    @rule(actor=actors)
    def list_jobs(self, actor: Actor) -> None:
        r = self.call(actor, "GET", "/v1/jobs", params={"limit": 500}, expect={200})
        for job in r.json()["items"]:
            assert self.jobs.get(job["id"], actor.scope) == actor.scope, job
            self.jobs.setdefault(job["id"], actor.scope)
            self.job_convs.setdefault(job["id"], job["conversation_id"])

    @precondition(lambda self: bool(self.jobs))
    @rule(actor=actors, data=st.data())
    def read_job(self, actor: Actor, data: st.DataObject) -> None:
        jid = data.draw(st.sampled_from(sorted(self.jobs)), label="jid")
        actor = self.as_owner(data, actor, self.jobs[jid])
        cid = self.job_convs[jid]
        own = self.jobs[jid] == actor.scope and (cid is None or cid not in self.deleted_convs)
        self.call(actor, "GET", f"/v1/jobs/{jid}", expect={200} if own else {404})
        # Retrying a job that is not dead is a 409 for its owner, a 404 for anyone else.
        self.call(actor, "POST", f"/v1/jobs/{jid}/retry", expect={409} if own else {404})

    # -- long-term facts and profile -------------------------------------------------------

    @rule(actor=actors)
    def add_fact(self, actor: Actor) -> None:
        body = {"content": f"likes {self.canary(actor.scope)}", "category": "context"}
        r = self.call(actor, "POST", "/v1/facts", json=body, expect={201})
        self.facts[r.json()["id"]] = actor.scope

    @rule(actor=actors, status=st.sampled_from(["active", "all", "superseded"]))
    def list_facts(self, actor: Actor, status: str) -> None:
        r = self.call(
            actor, "GET", "/v1/facts", params={"status": status, "limit": 500}, expect={200}
        )
        for fact in r.json()["items"]:
            assert self.facts.get(fact["id"]) == actor.scope, fact

    @precondition(lambda self: bool(self.facts))
    @rule(actor=actors, data=st.data(), op=st.sampled_from(["get", "history", "edit", "delete"]))
    def touch_fact(self, actor: Actor, data: st.DataObject, op: str) -> None:
        fid = data.draw(st.sampled_from(sorted(self.facts)), label="fid")
        actor = self.as_owner(data, actor, self.facts[fid])
        own = self.facts[fid] == actor.scope and fid not in self.erased_facts
        url = f"/v1/facts/{fid}"
        if op == "get":
            self.call(actor, "GET", url, expect={200} if own else {404})
        elif op == "history":
            self.call(actor, "GET", f"{url}/history", expect={200} if own else {404})
        elif op == "edit":
            body = {"content": f"now likes {self.canary(actor.scope)}"}
            # An owner's superseded version refuses the edit (409); anyone else's is a 404.
            r = self.call(actor, "PATCH", url, json=body, expect={200, 409} if own else {404})
            if r.status_code == 200:
                self.facts[r.json()["id"]] = actor.scope
        else:
            r = self.call(actor, "DELETE", url, expect={204} if own else {404})
            if r.status_code == 204:
                self.erased_facts.add(fid)

    @rule(actor=actors)
    def profile(self, actor: Actor) -> None:
        self.call(actor, "GET", "/v1/profile", expect={200})

    # -- agent state -----------------------------------------------------------------------

    @rule(actor=actors, write=st.booleans())
    def user_working_memory(self, actor: Actor, write: bool) -> None:
        if write:
            body = {"content": f"notes {self.canary(actor.scope)}"}
            self.call(actor, "PUT", "/v1/working-memory", json=body, expect={200})
            self.user_working.add(actor.scope)
        else:
            expect = {200} if actor.scope in self.user_working else {404}
            self.call(actor, "GET", "/v1/working-memory", expect=expect)

    @rule(actor=actors, data=st.data(), write=st.booleans())
    def conversation_working_memory(self, actor: Actor, data: st.DataObject, write: bool) -> None:
        picked = self.pick_conv(data, actor)
        if picked is None:
            return
        actor, cid = picked
        params = {"conversation_id": cid}
        if write:
            body = {"content": f"conv notes {self.canary(actor.scope)}"}
            expect = self.expect_conv(cid, actor)
            r = self.call(
                actor, "PUT", "/v1/working-memory", params=params, json=body, expect=expect
            )
            if r.status_code == 200:
                self.conv_working.add(cid)
        else:
            expect = {404}
            if self.live(cid, actor.scope):
                expect = {200} if cid in self.conv_working else {404}
            self.call(actor, "GET", "/v1/working-memory", params=params, expect=expect)

    @rule(actor=actors, data=st.data(), write=st.booleans())
    def plan(self, actor: Actor, data: st.DataObject, write: bool) -> None:
        picked = self.pick_conv(data, actor)
        if picked is None:
            return
        actor, cid = picked
        url = f"/v1/conversations/{cid}/plan"
        if write:
            body = {"document": {"steps": [self.canary(actor.scope)]}}
            r = self.call(actor, "PUT", url, json=body, expect=self.expect_conv(cid, actor))
            if r.status_code == 200:
                self.plans.add(cid)
        else:
            own = self.live(cid, actor.scope) and cid in self.plans
            self.call(actor, "GET", url, expect={200} if own else {404})

    @rule(
        actor=actors,
        data=st.data(),
        name=st.sampled_from(NAMES),
        run=st.sampled_from(["r1", "r2"]),
        link=st.booleans(),
    )
    def save_checkpoint(
        self, actor: Actor, data: st.DataObject, name: str, run: str, link: bool
    ) -> None:
        body: dict[str, Any] = {}
        expect = {200}
        if link:
            picked = self.pick_conv(data, actor)
            if picked is None:
                return
            actor, cid = picked
            body["conversation_id"] = cid
            expect = self.expect_conv(cid, actor)
        body["state"] = {"at": self.canary(actor.scope)}
        r = self.call(actor, "PUT", f"/v1/checkpoints/{name}/{run}", json=body, expect=expect)
        if r.status_code == 200:
            self.checkpoints.add((actor.scope, name, run))

    @rule(
        actor=actors, data=st.data(), name=st.sampled_from(NAMES), run=st.sampled_from(["r1", "r2"])
    )
    def load_checkpoint(self, actor: Actor, data: st.DataObject, name: str, run: str) -> None:
        savers = sorted(s for s, n, r in self.checkpoints if (n, r) == (name, run))
        if savers:
            actor = self.as_owner(data, actor, data.draw(st.sampled_from(savers), label="saver"))
        own = (actor.scope, name, run) in self.checkpoints
        url = f"/v1/checkpoints/{name}/{run}"
        self.call(actor, "GET", url, expect={200} if own else {404})

    # -- node memory -----------------------------------------------------------------------

    @rule(
        actor=actors,
        data=st.data(),
        app=st.sampled_from(APPS),
        node=st.sampled_from(NODES),
        write=st.booleans(),
    )
    def node_memory(
        self, actor: Actor, data: st.DataObject, app: str, node: str, write: bool
    ) -> None:
        picked = self.pick_conv(data, actor)
        if picked is None:
            return
        actor, cid = picked
        base = f"/v1/apps/{app}/conversations/{cid}/nodes/{node}"
        if write:
            c = self.canary(actor.scope)
            body = {
                "message_id": f"m{next(self.counter)}",
                "user_content": f"ask {c}",
                "assistant_content": f"answer {c}",
            }
            self.call(
                actor, "POST", f"{base}/turns", json=body, expect=self.expect_conv(cid, actor, 201)
            )
        else:
            self.call(actor, "GET", f"{base}/history", expect=self.expect_conv(cid, actor))


# Under the CI profile this stays well under a minute on two cores; the dev profile keeps
# the same counts but draws new examples on every run.
RestIsolation.TestCase.settings = settings(max_examples=15, stateful_step_count=30, deadline=None)
test_rest_isolation_machine = RestIsolation.TestCase
