"""The remote client against a live server: the same scenario gives the same results
embedded and over HTTP; scopes are checked against the key; errors keep their class;
appends survive a dropped answer.

The server is uvicorn in a thread of this process, on a loopback socket bound to an
ephemeral port, over a SQLite file of its own. Waits are bounded loops, never timing
assertions.
"""

from __future__ import annotations

import dataclasses
import enum
import re
import socket
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path
from typing import Any

import httpx
import pytest
from hypothesis import given
from hypothesis import strategies as st
from pydantic import BaseModel

from memstrata import AsyncMemory, Memory, Scope, errors
from memstrata.client import AsyncRemoteMemory, Identity, RemoteMemory, connect
from memstrata.client._wire import (
    AGENT_HEADER,
    USER_HEADER,
    error_from_response,
    scope_headers,
)
from memstrata.config import Settings
from memstrata.errors import (
    BackendUnavailable,
    Forbidden,
    InvalidInput,
    MemstrataError,
    NotFound,
)
from memstrata.ids import new_id
from support import served_in_thread

pytestmark = pytest.mark.server

ALICE = Scope("t1", "alice")
BOB = Scope("t1", "bob")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


# -- a live server -----------------------------------------------------------------------------


@dataclasses.dataclass
class Live:
    url: str
    keys: Memory  # a second handle on the server's database, for making keys

    def key(self, tenant: str, user: str | None = None) -> str:
        return self.keys.keys.create(tenant, user=user, admin=user is None)[1]


def _settings(home: Path, db: str) -> Settings:
    # Keyword recall only: read-path embedding is bounded in wall time, so with vectors the
    # two sides' search results would depend on how loaded the machine is.
    return Settings(home=home, db=db, worker="off", recall_embed="off")


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    from memstrata.server import create_app

    db = f"sqlite:///{(tmp_path / 'server.db').as_posix()}"
    settings = _settings(tmp_path / "server-home", db)
    with (
        served_in_thread(create_app(settings=settings)) as url,
        Memory.open(db, settings=settings) as keys,
    ):
        yield Live(url, keys)


@pytest.fixture
def embedded(tmp_path: Path) -> Iterator[Memory]:
    db = f"sqlite:///{(tmp_path / 'embedded.db').as_posix()}"
    mem = Memory.open(db, settings=_settings(tmp_path / "embedded-home", db))
    yield mem
    mem.close()


class Recording(httpx.HTTPTransport):
    """A real transport that remembers each request; ``drop`` loses the answers of
    matching requests after the server has handled them (a connection cut mid-reply)."""

    def __init__(self, drop: Callable[[httpx.Request], bool] | None = None, times: int = 1):
        super().__init__()
        self.requests: list[httpx.Request] = []
        self._drop = drop
        self._times = times

    def handle_request(self, request: httpx.Request) -> httpx.Response:
        self.requests.append(request)
        response = super().handle_request(request)
        if self._drop is not None and self._times > 0 and self._drop(request):
            self._times -= 1
            response.read()
            response.close()
            raise httpx.ReadError("connection dropped", request=request)
        return response

    def sent(self, method: str, suffix: str) -> list[httpx.Request]:
        return [r for r in self.requests if r.method == method and r.url.path.endswith(suffix)]


# -- normalising results so two stores compare --------------------------------------------------

_UUID = re.compile(r"[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}")


class Plain:
    """Results as plain data: ids become labels in order of appearance, times a marker."""

    def __init__(self) -> None:
        self.labels: dict[str, str] = {}

    def __call__(self, value: Any) -> Any:
        if isinstance(value, str):  # ids inside messages too
            return _UUID.sub(lambda m: self.labels.setdefault(m[0], f"id{len(self.labels)}"), value)
        if isinstance(value, enum.Enum):
            return value.value
        if isinstance(value, datetime):
            return "<time>"
        if isinstance(value, BaseModel):
            return self(value.model_dump())
        if dataclasses.is_dataclass(value) and not isinstance(value, type):
            value = {f.name: getattr(value, f.name) for f in dataclasses.fields(value)}
        if isinstance(value, dict):
            # A node turn's created_at is microseconds, not a datetime.
            return {k: "<time>" if k == "created_at" else self(v) for k, v in value.items()}
        if isinstance(value, list | tuple):
            return [self(v) for v in value]
        return value


def outcome(call: Callable[[], Any]) -> Any:
    """The result, or the error class and message (both sides must fail alike)."""
    try:
        return call()
    except MemstrataError as exc:
        return ("error", type(exc).__name__, exc.message)


def scenario(mem: Any, scope: Scope) -> list[tuple[str, Any]]:
    """One app's calls; returns (step, result) pairs. ``mem`` is a Memory or a RemoteMemory."""
    p = Plain()
    out: list[tuple[str, Any]] = []

    def step(name: str, value: Any) -> Any:
        out.append((name, p(value)))
        return value

    conv = step("create", mem.conversations.create(scope, title="support", metadata={"k": 1}))
    cid = conv.id
    step("system", mem.messages.append(scope, cid, role="system", content="Be brief."))
    q = step("q", mem.messages.append(scope, cid, role="user", content="What is WAL mode?"))
    a = step(
        "a", mem.messages.append(scope, cid, role="assistant", content="Write-ahead logging ...")
    )
    step(
        "b (regeneration)",
        mem.messages.append(
            scope, cid, role="assistant", content="A journal mode of SQLite ...", parent_id=q.id
        ),
    )
    u2 = step("u2", mem.messages.append(scope, cid, role="user", content="And checkpoints?"))
    pending = step("pending", mem.messages.append(scope, cid, role="assistant", status="pending"))
    step(
        "complete",
        mem.messages.complete(scope, cid, pending.id, content="They fold the WAL back ..."),
    )
    mid = new_id()
    step("put", mem.messages.put(scope, cid, role="user", content="thanks", id=mid))
    step("put again", mem.messages.put(scope, cid, role="user", content="thanks", id=mid))
    step(
        "put conflict",
        outcome(lambda: mem.messages.put(scope, cid, role="user", content="x", id=mid)),
    )
    step("get message", mem.messages.get(scope, cid, q.id))
    step("leaves", mem.messages.leaves(scope, cid))
    step("leaves page", mem.messages.leaves(scope, cid, limit=1))
    for budget in (None, 2000, 30, 0):
        h = mem.history(scope, cid, max_tokens=budget)
        step(f"history {budget}", (h.to_dict(), h.to_openai(), h.to_text()))
    h = mem.history(scope, cid, leaf_id=a.id, max_messages=2)
    step("history of a", (h.to_dict(), h.to_openai()))
    h = mem.history(scope, cid, before=pending.id, max_messages=None)
    step("history before", (h.to_dict(), h.to_openai()))
    step("set active leaf", mem.conversations.set_active_leaf(scope, cid, a.id))
    step("update", mem.conversations.update(scope, cid, title="renamed"))
    step("get", mem.conversations.get(scope, cid))
    step("list", mem.conversations.list(scope))
    # Recall breaks exact ties by message id, and ids differ between two stores: what is
    # recalled must match, in any order (exact order: test_reads_match_on_one_store).
    step("context", _unordered_recall(mem.context(scope, cid, query="WAL").to_dict()))
    step("context of a", _unordered_recall(mem.context(scope, cid, leaf_id=a.id).to_dict()))
    hits = mem.recall.search(scope, "WAL mode", k=3)
    step("search", sorted((h.message.content, h.conversation_id, h.provenance) for h in hits))
    step("search in conv", mem.recall.search(scope, "checkpoints", conversation_id=cid, k=1))

    fact = step("fact", mem.facts.add(scope, "Prefers metric units", category="preference"))
    step("fact 2", mem.facts.add(scope, "Works on SQLite", confidence=0.8))
    step("fact dup", outcome(lambda: mem.facts.add(scope, "Prefers metric units")))
    step("facts", mem.facts.list(scope))
    step("edit", mem.facts.edit(scope, fact.id, content="Prefers SI units"))
    step("fact history", mem.facts.history(scope, fact.id))
    step("facts all", mem.facts.list(scope, status=None))
    step("fact get", mem.facts.get(scope, fact.id))
    mem.facts.delete(scope, fact.id)
    step("fact deleted", outcome(lambda: mem.facts.get(scope, fact.id)))
    step("facts after delete", mem.facts.list(scope, category="preference"))
    step("profile", mem.longterm.profile(scope))

    step("working none", outcome(lambda: mem.working.get(scope)))
    step("working put", mem.working.put(scope, "# notes\n- WAL"))
    step("working cas", mem.working.put(scope, "# notes v2", expected_version=1))
    step("working stale", outcome(lambda: mem.working.put(scope, "x", expected_version=1)))
    step("working exists", outcome(lambda: mem.working.put(scope, "x", expected_version=0)))
    step("working get", mem.working.get(scope))
    step(
        "working json",
        mem.working.put(
            scope, {"step": 1}, conversation_id=cid, format="json", json_schema={"type": "object"}
        ),
    )
    step("working conv", mem.working.get(scope, conversation_id=cid))
    step("plan", mem.plans.put(scope, cid, {"steps": ["a", "b"]}))
    step("plan stale", outcome(lambda: mem.plans.put(scope, cid, {}, expected_version=7)))
    step("plan get", mem.plans.get(scope, cid))
    step("iteration", mem.iterations.append(scope, cid, "build", outcome="failed", error="boom"))
    step("iterations", mem.iterations.list(scope, cid, task="build"))
    step("context task", _unordered_recall(mem.context(scope, cid, task="build").to_dict()))
    step("checkpoint", mem.checkpoints.save(scope, "approve", "run1", {"x": 1}, ttl_s=3600))
    step("checkpoint load", mem.checkpoints.load(scope, "approve", "run1"))
    mem.checkpoints.delete(scope, "approve", "run1")
    step("checkpoint gone", outcome(lambda: mem.checkpoints.load(scope, "approve", "run1")))
    step("snapshot", mem.snapshots.put(scope, cid, "run1", {"ui": [1, 2]}))
    step("snapshot get", mem.snapshots.get(scope, cid, "run1"))

    step(
        "turn",
        mem.nodes.add_turn(
            scope,
            "app",
            cid,
            "llm1",
            message_id=q.id,
            user_content="hi",
            assistant_content="hello",
            user_files=[
                {
                    "type": "image",
                    "transfer_method": "remote_url",
                    "url": "https://example.invalid/a.png",
                }
            ],
        ),
    )
    nh = mem.nodes.history(scope, "app", cid, "llm1", max_tokens=None)
    step("node history", (nh.to_dict(), nh.to_openai()))
    mem.nodes.delete(scope, "app", cid, "llm1")
    step("node history after delete", mem.nodes.history(scope, "app", cid, "llm1").to_dict())

    job = mem.longterm.observe(scope, cid)
    step("observe", (job.kind, job.status, job.conversation_id))
    # Part of the receipt: its actor differs by design (the Python API, or the server's key),
    # and the vectors counted depend on how far the background embedding has come.
    receipt = outcome(lambda: mem.messages.delete(scope, cid, u2.id))
    step("delete message", (receipt.kind, receipt.subject_ids, receipt.tables["messages"]))
    step("receipt verified", (receipt.verified, receipt.findings))
    step(
        "after message delete", (mem.conversations.get(scope, cid), mem.messages.leaves(scope, cid))
    )
    step("jobs", [(j.kind, j.status, j.conversation_id) for j in _jobs(mem, scope).items])
    mem.conversations.delete(scope, cid)
    step("deleted", outcome(lambda: mem.conversations.get(scope, cid)))
    step("history of deleted", outcome(lambda: mem.history(scope, cid)))
    return out


def _unordered_recall(ctx: dict[str, Any]) -> dict[str, Any]:
    def lines(message: dict[str, Any]) -> dict[str, Any]:
        text = message["content"]
        if isinstance(text, str) and text.startswith("<recalled-messages>"):
            return {**message, "content": sorted(text.splitlines())}
        return message

    report = {k: v for k, v in ctx["report"].items() if k != "hash"}  # a hash of the order
    return {"messages": [lines(m) for m in ctx["messages"]], "report": report}


def _jobs(mem: Any, scope: Scope) -> Any:
    if isinstance(mem, RemoteMemory):
        return mem.jobs.list()  # a user key sees its own jobs
    return mem.jobs.list(tenant=scope.tenant, user=scope.user)


def test_the_same_scenario_gives_the_same_results_embedded_and_remote(
    live: Live, embedded: Memory
) -> None:
    want = scenario(embedded, ALICE)
    with RemoteMemory(live.url, live.key("t1", "alice")) as remote:
        got = scenario(remote, ALICE)
    assert [name for name, _ in got] == [name for name, _ in want]
    for (name, g), (_, w) in zip(got, want, strict=True):
        assert g == w, f"{name}:\n{g}\n{w}"


def test_reads_match_on_one_store(live: Live) -> None:
    """Reads through the server equal the embedded facade's on the server's own database."""
    local = live.keys  # an embedded Memory on the server's database
    with RemoteMemory(live.url, live.key("t1", "alice")) as remote:
        conv = remote.conversations.create(ALICE, title="one store")
        cid = conv.id
        q = remote.messages.append(ALICE, cid, role="user", content="How do I tune SQLite WAL?")
        a = remote.messages.append(ALICE, cid, role="assistant", content="Set a checkpoint size.")
        remote.messages.append(ALICE, cid, role="assistant", content="Use PRAGMA.", parent_id=q.id)
        remote.messages.append(ALICE, cid, role="user", content="And the journal size limit?")
        remote.facts.add(ALICE, "Runs SQLite in production", category="context")
        remote.working.put(ALICE, "- tuning WAL")

        assert remote.conversations.get(ALICE, cid) == local.conversations.get(ALICE, cid)
        assert remote.conversations.list(ALICE) == local.conversations.list(ALICE)
        assert remote.messages.get(ALICE, cid, a.id) == local.messages.get(ALICE, cid, a.id)
        assert remote.messages.leaves(ALICE, cid) == local.messages.leaves(ALICE, cid)
        for kwargs in ({}, {"max_tokens": 12}, {"leaf_id": a.id}, {"max_tokens": None}):
            got, want = remote.history(ALICE, cid, **kwargs), local.history(ALICE, cid, **kwargs)
            assert got.to_dict() == want.to_dict()
            assert got.to_openai() == want.to_openai()
        for kwargs in ({}, {"budget": 40}, {"query": "journal"}, {"leaf_id": a.id}):
            got_ctx = remote.context(ALICE, cid, **kwargs)
            want_ctx = local.context(ALICE, cid, **kwargs)
            # Asked twice in a row: the second repeats the first, all of it cacheable.
            assert want_ctx.report.cache.prefix_tokens == want_ctx.report.total
            want_ctx.report.cache.prefix_tokens = got_ctx.report.cache.prefix_tokens
            assert got_ctx.to_dict() == want_ctx.to_dict()
            assert got_ctx.to_anthropic() == want_ctx.to_anthropic()
            assert got_ctx.to_openai() == want_ctx.to_openai()
            assert got_ctx.report == want_ctx.report
        searches: list[tuple[str, dict[str, Any]]] = [
            ("WAL", {}),
            ("journal", {"message_range": 1, "k": 1}),
            ("WAL", {"explain": True, "explain_ids": [a.id, q.id, "nope"]}),
            ("journal", {"min_relevance": 0.5}),
        ]
        for query, options in searches:
            got_hits = remote.recall.search(ALICE, query, **options)
            want_hits = local.recall.search(ALICE, query, **options)
            assert got_hits == want_hits
            assert got_hits.pending == want_hits.pending
            assert got_hits.explained == want_hits.explained
        assert remote.facts.list(ALICE) == local.facts.list(ALICE)
        assert remote.working.get(ALICE) == local.working.get(ALICE)
        assert remote.longterm.profile(ALICE) == local.longterm.profile(ALICE)


# -- the async client ------------------------------------------------------------------------


async def ascenario(mem: Any, scope: Scope) -> list[tuple[str, Any]]:
    p = Plain()
    out: list[tuple[str, Any]] = []

    def step(name: str, value: Any) -> Any:
        out.append((name, p(value)))
        return value

    conv = step("create", await mem.conversations.create(scope, title="async"))
    cid = conv.id
    q = step("q", await mem.messages.append(scope, cid, role="user", content="Hello there"))
    step("a", await mem.messages.append(scope, cid, role="assistant", content="Hi!"))
    step(
        "b",
        await mem.messages.append(scope, cid, role="assistant", content="Hello!", parent_id=q.id),
    )
    step("leaves", await mem.messages.leaves(scope, cid))
    h = await mem.history(scope, cid, max_tokens=10)
    step("history", (h.to_dict(), h.to_openai()))
    step("context", _unordered_recall((await mem.context(scope, cid, budget=300)).to_dict()))
    hits = await mem.recall.search(scope, "hello", k=2)
    step("search", sorted(h.message.content for h in hits))
    fact = step("fact", await mem.facts.add(scope, "Likes greetings"))
    step("edit", await mem.facts.edit(scope, fact.id, confidence=0.5))
    step("facts", await mem.facts.list(scope))
    step("fact history", await mem.facts.history(scope, fact.id))
    step("working", await mem.working.put(scope, "note"))
    step("working get", await mem.working.get(scope))
    step("profile", await mem.longterm.profile(scope))
    await mem.conversations.delete(scope, cid)
    try:
        await mem.conversations.get(scope, cid)
    except NotFound as exc:
        step("deleted", exc.message)
    return out


@pytest.mark.anyio
async def test_async_client_matches_the_async_embedded_facade(live: Live, tmp_path: Path) -> None:
    db = f"sqlite:///{(tmp_path / 'async.db').as_posix()}"
    local = AsyncMemory.open(db, settings=_settings(tmp_path / "async-home", db))
    try:
        want = await ascenario(local, ALICE)
    finally:
        await local.close()
    async with connect(live.url, api_key=live.key("t1", "alice"), asynchronous=True) as remote:
        assert isinstance(remote, AsyncRemoteMemory)
        got = await ascenario(remote, ALICE)
        assert await remote.identity() == Identity("t1", "alice", None, False)
        with pytest.raises(Forbidden):
            await remote.conversations.list(BOB)
    assert got == want


# -- scopes and keys ---------------------------------------------------------------------------


def test_a_user_key_refuses_other_scopes_before_sending(live: Live) -> None:
    transport = Recording()
    with RemoteMemory(live.url, live.key("t1", "alice"), transport=transport) as mem:
        assert mem.identity() == Identity("t1", "alice", None, False)
        conv = mem.conversations.create(ALICE)
        sent = len(transport.requests)
        for scope in (BOB, Scope("t2", "alice"), Scope("t1", "alice", "agent1")):
            with pytest.raises(Forbidden):
                mem.conversations.get(scope, conv.id)
            with pytest.raises(Forbidden):
                mem.messages.append(scope, conv.id, role="user", content="hi")
        with pytest.raises(Forbidden):
            mem.jobs.list(user="bob")
        with pytest.raises(Forbidden):
            mem.users.list("t2")
        assert len(transport.requests) == sent  # nothing went out
        # A user key never sends the admin headers.
        assert all(USER_HEADER not in r.headers for r in transport.requests)


def test_an_admin_key_acts_for_several_users(live: Live) -> None:
    transport = Recording()
    with RemoteMemory(live.url, live.key("t1"), transport=transport) as admin:
        assert admin.identity() == Identity("t1", None, None, True)
        mine = admin.conversations.create(ALICE, title="alice's")
        theirs = admin.conversations.create(BOB, title="bob's")
        agent = admin.conversations.create(Scope("t1", "alice", "helper"), title="agent's")
        admin.messages.append(ALICE, mine.id, role="user", content="from alice")
        admin.messages.append(BOB, theirs.id, role="user", content="from bob")
        assert agent.agent == "helper"
        assert [c.title for c in admin.conversations.list(ALICE).items] == ["alice's"]
        assert [c.title for c in admin.conversations.list(BOB).items] == ["bob's"]
        with pytest.raises(NotFound):
            admin.conversations.get(BOB, mine.id)
        posted = transport.sent("POST", "/v1/conversations")
        assert [(r.headers[USER_HEADER], r.headers.get(AGENT_HEADER)) for r in posted] == [
            ("alice", None),
            ("bob", None),
            ("alice", "helper"),
        ]
        assert {u for u, _ in admin.users.list("t1").items} == {"alice", "bob"}
        assert admin.jobs.list(user="alice").items == []
        with pytest.raises(Forbidden):
            admin.conversations.list(Scope("t2", "alice"))
        # What the admin made for alice, alice's own key sees.
        with RemoteMemory(live.url, live.key("t1", "alice")) as alice:
            history = alice.history(ALICE, mine.id)
            assert [m.content for m in history.messages] == ["from alice"]
        deleted = admin.users.delete(BOB)
        assert deleted == len(deleted.receipt.subject_ids) - 1  # bob's conversations
        assert (deleted.receipt.kind, deleted.receipt.subject_ids[0]) == ("user", "bob")
        assert deleted.receipt.verified is True
        assert admin.receipts.get("t1", deleted.receipt.id) == deleted.receipt
        with pytest.raises(NotFound):
            admin.conversations.get(BOB, theirs.id)
        assert {u for u, _ in admin.users.list("t1").items} == {"alice"}


def test_another_users_conversation_is_not_found(live: Live) -> None:
    with (
        RemoteMemory(live.url, live.key("t1", "alice")) as alice,
        RemoteMemory(live.url, live.key("t1", "bob")) as bob,
    ):
        conv = alice.conversations.create(ALICE)
        message = alice.messages.append(ALICE, conv.id, role="user", content="secret")
        with pytest.raises(NotFound) as caught:
            bob.conversations.get(BOB, conv.id)
        assert caught.value.detail["status"] == 404
        assert conv.id in caught.value.message
        with pytest.raises(NotFound):
            bob.messages.get(BOB, conv.id, message.id)
        with pytest.raises(NotFound):
            bob.messages.append(BOB, conv.id, role="user", content="mine now")
        assert bob.recall.search(BOB, "secret") == []
        assert alice.conversations.get(ALICE, conv.id).message_count == 1


def test_find_by_id_and_splice_over_rest(live: Live) -> None:
    with RemoteMemory(live.url, live.key("t1", "alice")) as alice:
        conv = alice.conversations.create(ALICE)
        q = alice.messages.append(ALICE, conv.id, role="user", content="one?")
        a = alice.messages.append(ALICE, conv.id, role="assistant", content="1")
        q2 = alice.messages.append(ALICE, conv.id, role="user", content="two?")
        assert alice.messages.find(ALICE, a.id).conversation_id == conv.id
        receipt = alice.messages.delete(ALICE, conv.id, a.id, mode="splice")
        assert receipt.subject_ids == [conv.id, a.id]
        assert alice.messages.get(ALICE, conv.id, q2.id).parent_id == q.id
        with pytest.raises(NotFound):
            alice.messages.find(ALICE, a.id)


def test_a_bad_key_is_unauthorized(live: Live) -> None:
    from memstrata.errors import Unauthorized

    key = "msk_000000000000_notakeyatall0000000000"
    with RemoteMemory(live.url, key) as mem, pytest.raises(Unauthorized):
        mem.conversations.list(ALICE)


# -- retries -----------------------------------------------------------------------------------


def test_an_append_whose_answer_was_lost_is_sent_again_and_stored_once(live: Live) -> None:
    transport = Recording(lambda r: r.method == "POST" and r.url.path.endswith("/messages"))
    with RemoteMemory(live.url, live.key("t1", "alice"), transport=transport) as mem:
        conv = mem.conversations.create(ALICE)
        message = mem.messages.append(ALICE, conv.id, role="user", content="only once")
        posts = transport.sent("POST", "/messages")
        assert len(posts) == 2  # the first answer was lost after the server stored it
        assert posts[0].content == posts[1].content  # the same client-made id both times
        assert mem.messages.get(ALICE, conv.id, message.id) == message
        assert mem.conversations.get(ALICE, conv.id).message_count == 1
        # The caller's own id replays the same way.
        again, created = mem.messages.put(
            ALICE, conv.id, role="user", content="only once", id=message.id
        )
        assert (again, created) == (message, False)


def test_a_create_whose_answer_was_lost_is_not_sent_again(live: Live) -> None:
    transport = Recording(lambda r: r.method == "POST" and r.url.path == "/v1/conversations")
    with RemoteMemory(live.url, live.key("t1", "alice"), transport=transport) as mem:
        with pytest.raises(BackendUnavailable):
            mem.conversations.create(ALICE, title="maybe")
        assert len(transport.sent("POST", "/v1/conversations")) == 1
        assert [c.title for c in mem.conversations.list(ALICE).items] == ["maybe"]


def test_reads_are_retried_when_the_connection_drops(live: Live) -> None:
    transport = Recording(lambda r: r.method == "GET" and r.url.path == "/v1/conversations", 2)
    with RemoteMemory(live.url, live.key("t1", "alice"), transport=transport) as mem:
        assert mem.conversations.list(ALICE).items == []
        assert len(transport.sent("GET", "/v1/conversations")) == 3


def test_no_server_is_backend_unavailable() -> None:
    with socket.socket(socket.AF_INET, socket.SOCK_STREAM) as closed:
        closed.bind(("127.0.0.1", 0))  # bound, not listening: connections are refused
        transport = Recording()
        url = f"http://127.0.0.1:{closed.getsockname()[1]}"
        mem = RemoteMemory(url, "msk_x", transport=transport)
        with mem, pytest.raises(BackendUnavailable, match="cannot reach"):
            mem.conversations.list(ALICE)
        assert len(transport.requests) == 3  # refused connections are tried again


# -- errors and scopes without a server ------------------------------------------------------


def _problem(status: int, code: str, detail: str = "what happened") -> bytes:
    import json

    return json.dumps({"status": status, "code": code, "detail": detail, "title": "t"}).encode()


@pytest.mark.parametrize("name", errors.__all__)
def test_every_error_class_comes_back_from_its_problem(name: str) -> None:
    cls = getattr(errors, name)
    exc = error_from_response(
        cls.status, "application/problem+json", _problem(cls.status, cls.code)
    )
    assert type(exc) is cls
    assert exc.message == "what happened"


def test_problems_without_a_known_code_map_by_status() -> None:
    exc = error_from_response(503, "application/problem+json", _problem(503, "extraction_failed"))
    assert type(exc) is BackendUnavailable
    exc = error_from_response(502, "text/html", b"<html>bad gateway</html>")
    assert type(exc) is BackendUnavailable
    assert exc.message == "HTTP 502: <html>bad gateway</html>"
    exc = error_from_response(405, "application/problem+json", _problem(405, "method_not_allowed"))
    assert type(exc) is MemstrataError
    exc = error_from_response(
        422,
        "application/problem+json",
        b'{"detail": "title: too long", "code": "invalid_input", "field": "title"}',
    )
    assert exc.detail["field"] == "title"
    exc = error_from_response(429, "application/problem+json", _problem(429, "rate_limited"), "3")
    assert exc.detail["retry_after"] == 3.0


def test_a_malformed_answer_is_a_memstrata_error() -> None:
    def answer(request: httpx.Request) -> httpx.Response:
        if request.url.path == "/v1/me":
            return httpx.Response(200, json={"tenant": "t1", "user": "alice", "admin": False})
        return httpx.Response(200, json={"unexpected": True})

    m = RemoteMemory("http://memstrata.test", "k", transport=httpx.MockTransport(answer))
    with m, pytest.raises(MemstrataError, match="unexpected shape"):
        m.conversations.get(ALICE, "c1")


_NAME = st.from_regex(r"[A-Za-z0-9][A-Za-z0-9._:@+\-]{0,20}", fullmatch=True)


@given(user=_NAME, agent=st.none() | _NAME, other=_NAME)
def test_scope_headers_follow_the_key(user: str, agent: str | None, other: str) -> None:
    scope = Scope("t1", user, agent)
    admin = Identity("t1", None, None, True)
    want = {USER_HEADER: user} | ({AGENT_HEADER: agent} if agent else {})
    assert scope_headers(admin, scope) == want
    own = Identity("t1", user, None, False)
    if agent is None:
        assert scope_headers(own, scope) == {}
    else:
        with pytest.raises(Forbidden):
            scope_headers(own, scope)
    if other != user:
        with pytest.raises(Forbidden):
            scope_headers(Identity("t1", other, None, False), scope)
    with pytest.raises(Forbidden):
        scope_headers(Identity("t2", None, None, True), scope)


def test_connect_needs_an_http_url_and_a_key() -> None:
    from memstrata.errors import InvalidInput

    with pytest.raises(InvalidInput):
        connect("sqlite:///x.db", api_key="k")
    with pytest.raises(InvalidInput):
        connect("http://127.0.0.1:8700", api_key="")
    mem = connect("http://127.0.0.1:8700/", api_key="k")
    assert isinstance(mem, RemoteMemory)
    assert mem.url == "http://127.0.0.1:8700"
    mem.close()


def test_memory_open_with_an_http_url_gives_the_remote_facade(live: Live) -> None:
    secret = live.key("t-open", "alice")
    with Memory.open(live.url, api_key=secret) as mem:
        assert isinstance(mem, RemoteMemory)
        scope = Scope("t-open", "alice")
        conv = mem.conversations.create(scope, title="one string changed")
        mem.messages.append(scope, conv.id, role="user", content="hello over http")
        assert [m.content for m in mem.history(scope, conv.id).messages] == ["hello over http"]
    with pytest.raises(InvalidInput, match="api_key"):
        Memory.open(live.url)
    with pytest.raises(InvalidInput, match="api_key is only"):
        Memory.open("sqlite:///x.db", api_key=secret)


def test_messages_list_compact_and_a_bound_scope_over_rest(live: Live) -> None:
    local = live.keys
    with RemoteMemory(live.url, live.key("t1", "alice")) as remote:
        alice = remote.scoped(ALICE)
        cid = alice.conversations.create(title="parity").id
        q = alice.messages.append(cid, role="user", content="Which port does it use?")
        alice.messages.append(cid, role="assistant", content="8700.", parent_id=q.id)
        alice.messages.append(cid, role="assistant", content="Port 8700.", parent_id=q.id)
        page = remote.messages.list(ALICE, cid, limit=2)
        assert page == local.messages.list(ALICE, cid, limit=2)
        assert page.next_cursor is not None
        rest = alice.messages.list(cid, cursor=page.next_cursor)
        assert [m.id for m in page.items + rest.items] == [
            m.id for m in local.messages.list(ALICE, cid).items
        ]
        # No LLM and a short branch: the outcome and reason match the embedded facade's.
        got = alice.compact(cid)
        want = local.compact(ALICE, cid)
        assert (got.outcome, got.reason) == (want.outcome, want.reason)


def test_as_of_reads_match_embedded_and_remote(live: Live) -> None:
    """``as_of``/``known_at`` cross the wire as ISO times and give the embedded answers;
    a bad time is refused as InvalidInput on both."""
    local = live.keys
    with RemoteMemory(live.url, live.key("t1", "alice")) as remote:
        fact = remote.facts.add(ALICE, "Lives in Oslo")
        assert fact.valid_from is not None
        assert fact.recorded_at is not None
        cid = remote.conversations.create(ALICE).id
        remote.messages.append(ALICE, cid, role="user", content="Where do I live?")
        past = datetime(2020, 1, 1)
        now = datetime.now().astimezone()
        asks: list[dict[str, Any]] = [
            {},
            {"as_of": past},
            {"as_of": now},
            {"as_of": past, "known_at": now},
        ]
        for kwargs in asks:
            assert remote.facts.list(ALICE, **kwargs) == local.facts.list(ALICE, **kwargs)
        assert remote.facts.list(ALICE, as_of=past).items == []
        assert [f.id for f in remote.facts.list(ALICE, as_of=now.isoformat()).items] == [fact.id]
        got = remote.recall.search(ALICE, "Oslo", as_of=past)
        assert got == local.recall.search(ALICE, "Oslo", as_of=past) == []
        ctx = remote.context(ALICE, cid, as_of=past).to_dict()
        again = local.context(ALICE, cid, as_of=past).to_dict()
        # The second asking repeats the first whole: its prefix is all of it.
        assert again["report"]["cache"]["prefix_tokens"] == ctx["report"]["total"]
        again["report"]["cache"]["prefix_tokens"] = ctx["report"]["cache"]["prefix_tokens"]
        assert ctx == again
        bad_times: list[dict[str, Any]] = [{"as_of": "someday"}, {"known_at": "2026-02-30"}]
        for bad in bad_times:
            with pytest.raises(InvalidInput):
                remote.facts.list(ALICE, **bad)


def test_usage_and_budgets_over_http(live: Live) -> None:
    from memstrata.storage.plan import write
    from memstrata.usage.store import UsageRow, insert_rows

    now = live.keys.core.rt.clock()
    rows = [
        UsageRow("acme", "ann", "", "extraction", "m", "llm", 1, 0, 40, 2, 1000, now),
        UsageRow("acme", "ben", "", "compaction", "m", "llm", 1, 1, 7, 0, 1000, now),
    ]
    live.keys.core.engine.run(write(lambda: insert_rows(rows, ["r1", "r2"])))
    with connect(live.url, api_key=live.key("acme")) as admin:
        report = admin.usage.report("acme", group_by="user")
        assert [(i.key, i.tokens) for i in report.items] == [("ann", 42), ("ben", 7)]
        assert admin.usage.report(Scope("acme", "ben")).total.errors == 1
        budget = admin.usage.set_budget("acme", "extraction", 0)
        assert budget.exhausted
        assert budget.tenant == "acme"
        assert [b.purpose for b in admin.usage.budgets()] == ["extraction"]
        assert admin.usage.clear_budget("acme", "extraction") is True
        assert admin.usage.clear_budget("acme", "extraction") is False
    with connect(live.url, api_key=live.key("acme", "ann")) as ann:
        assert [i.key for i in ann.usage.report("acme", group_by="user").items] == ["ann"]
        with pytest.raises(Forbidden):
            ann.usage.report("acme", user="ben")
        with pytest.raises(Forbidden):
            ann.usage.set_budget("acme", "extraction", 5)
