"""The MCP server through the SDK's own client: ``memstrata mcp`` on stdio, and /mcp of a
live ``memstrata serve`` app (uvicorn on a loopback ephemeral port) behind API keys.

Waits are bounded loops (to fail instead of hanging), never timing assertions.
"""

from __future__ import annotations

import json
import sys
import threading
import time
from collections.abc import AsyncIterator, Iterator
from contextlib import asynccontextmanager
from dataclasses import dataclass
from pathlib import Path
from typing import TYPE_CHECKING, Any, TextIO, get_args

import httpx
import httpx2
import pytest
import uvicorn
from starlette.testclient import TestClient
from typer.testing import CliRunner

from lazy_names import lazy
from memstrata import AsyncMemory, Memory, Scope, cli
from memstrata.config import Settings
from memstrata.errors import BackendUnavailable
from memstrata.longterm.model import CATEGORIES, FactStatus
from memstrata.server import create_app
from memstrata.testing import FakeEmbedder

if TYPE_CHECKING:
    from mcp import Client, ClientSession, StdioServerParameters, stdio_client
    from mcp.client.streamable_http import streamable_http_client
    from mcp.types import CallToolResult

    from memstrata.mcpserver.server import build_server, fixed_scope
    from memstrata.mcpserver.tools import Category, FactStatusName
else:
    Client, ClientSession, StdioServerParameters, stdio_client = lazy(
        "mcp", "Client", "ClientSession", "StdioServerParameters", "stdio_client"
    )
    (streamable_http_client,) = lazy("mcp.client.streamable_http", "streamable_http_client")
    (CallToolResult,) = lazy("mcp.types", "CallToolResult")
    build_server, fixed_scope = lazy("memstrata.mcpserver.server", "build_server", "fixed_scope")
    Category, FactStatusName = lazy("memstrata.mcpserver.tools", "Category", "FactStatusName")

pytestmark = pytest.mark.anyio

TOOLS = {
    "create_conversation",
    "list_conversations",
    "add_message",
    "get_history",
    "get_context",
    "search_memory",
    "list_facts",
    "add_fact",
    "forget_fact",
    "remember_conversation",
    "get_working_memory",
    "update_working_memory",
    "get_reply_provenance",
    "get_fact_usage",
    "memory_health",
    "usage",
}
WAIT_SECONDS = 60  # upper bound for start-up on a loaded machine, not an expectation
UNKNOWN_ID = "01900000-0000-7000-8000-000000000000"
CANARY = "zanzibarcanary7731"


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _data(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, _text(result)
    assert isinstance(result.structured_content, dict)
    return result.structured_content


def _text(result: CallToolResult) -> str:
    """Everything a tool result shows the model: its text blocks and structured content."""
    parts = [getattr(block, "text", "") for block in result.content]
    parts.append(json.dumps(result.structured_content))
    return "\n".join(parts)


async def _call(session: ClientSession, tool: str, **args: Any) -> CallToolResult:
    return await session.call_tool(tool, args)


def test_schema_literals_follow_the_store() -> None:
    assert get_args(Category) == CATEGORIES
    assert set(get_args(FactStatusName)) == {s.value for s in FactStatus} | {"all"}


@pytest.fixture
def without_sdk(monkeypatch: pytest.MonkeyPatch) -> None:
    """As if the mcp extra were not installed (restored after the test)."""
    for name in [n for n in sys.modules if n.split(".", 1)[0] in {"mcp", "mcp_types"}]:
        monkeypatch.setitem(sys.modules, name, None)
    for name in ("mcpserver.tools", "mcpserver.server", "server.mcp_http"):
        monkeypatch.delitem(sys.modules, f"memstrata.{name}", raising=False)


def test_rest_app_and_cli_without_the_extra(without_sdk: None, tmp_path: Path) -> None:
    db = f"sqlite:///{(tmp_path / 'plain.db').as_posix()}"
    memory = AsyncMemory.open(db, settings=Settings(home=tmp_path, worker="off"))
    try:
        app = create_app(memory)  # the REST API never needs the extra
        with TestClient(app) as client:
            assert client.get("/healthz").status_code == 200
            assert client.post("/mcp", json={}).status_code == 404
    finally:
        memory.core.close()
    done = CliRunner().invoke(cli.app, ["mcp", "--db", db])
    assert done.exit_code == 1
    assert "pip install 'memstrata[mcp]'" in done.output


# -- in process --------------------------------------------------------------------------------


@pytest.fixture
async def local(tmp_path: Path) -> AsyncIterator[tuple[Client, AsyncMemory]]:
    mem = AsyncMemory.open(
        f"sqlite:///{(tmp_path / 'local.db').as_posix()}",
        settings=Settings(home=tmp_path, worker="off"),
    )
    try:
        async with Client(build_server(mem, fixed_scope(Scope("t1", "alice")))) as client:
            yield client, mem
    finally:
        await mem.close()


async def test_json_working_memory_takes_json_text(local: tuple[Client, AsyncMemory]) -> None:
    client, mem = local
    await mem.working.put(Scope("t1", "alice"), {"task": "pack"}, json_schema={"type": "object"})
    wm = _data(await client.call_tool("update_working_memory", {"content": '{"task": "go"}'}))
    assert (wm["format"], wm["content"], wm["version"]) == ("json", {"task": "go"}, 2)
    bad = await client.call_tool("update_working_memory", {"content": "- go"})
    assert bad.is_error
    assert "content is not JSON" in _text(bad)


async def test_usage_reports_only_the_servers_user(local: tuple[Client, AsyncMemory]) -> None:
    from memstrata.storage.plan import write
    from memstrata.usage.store import UsageRow, insert_rows

    client, mem = local
    now = mem.core.rt.clock()
    rows = [
        UsageRow("t1", "alice", "", "extraction", "m", "llm", 1, 0, 30, 3, 10, now),
        UsageRow("t1", "bob", "", "extraction", "m", "llm", 1, 0, 500, 0, 10, now),
    ]
    mem.core.engine.run(write(lambda: insert_rows(rows, ["a", "b"])))
    report = _data(await client.call_tool("usage", {"group_by": "user"}))
    assert [(i["key"], i["tokens"]) for i in report["items"]] == [("alice", 33)]
    report = _data(await client.call_tool("usage", {}))
    assert [(i["key"], i["calls"]) for i in report["items"]] == [("extraction", 1)]
    bad = await client.call_tool("usage", {"start": "not a time"})
    assert bad.is_error
    assert "ISO 8601" in _text(bad)


async def test_server_failures_hide_their_internals(
    local: tuple[Client, AsyncMemory], monkeypatch: pytest.MonkeyPatch
) -> None:
    client, mem = local

    async def down(*args: Any, **kwargs: Any) -> Any:
        raise BackendUnavailable("db.internal:5432 refused (user=svc password=hunter2)")

    monkeypatch.setattr(mem.conversations, "create", down)
    result = await client.call_tool("create_conversation", {})
    assert result.is_error
    assert "a backend is unavailable" in _text(result)
    assert "hunter2" not in _text(result)


# -- stdio ------------------------------------------------------------------------------------


def _cli_args(*args: str) -> list[str]:
    # ``python -m memstrata.cli`` would run cli.py as __main__, whose ``app`` the command
    # modules never register on; this is what the ``memstrata`` console script runs.
    return ["-c", "from memstrata.cli import main; main()", *args]


@asynccontextmanager
async def _stdio_session(
    params: StdioServerParameters, errlog: TextIO
) -> AsyncIterator[ClientSession]:
    async with (
        stdio_client(params, errlog=errlog) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def test_stdio_serves_the_command_line_scope(tmp_path: Path) -> None:
    db = f"sqlite:///{(tmp_path / 'stdio.db').as_posix()}"
    params = StdioServerParameters(
        command=sys.executable,
        args=_cli_args("mcp", "--db", db, "--tenant", "t1", "--user", "alice"),
        env={
            "MEMSTRATA_HOME": str(tmp_path / "home"),
            "MEMSTRATA_EMBEDDER": "none",
            "MEMSTRATA_WORKER": "off",
        },
        cwd=tmp_path,
    )
    with (tmp_path / "stderr.log").open("w") as errlog:
        async with _stdio_session(params, errlog) as session:
            listed = await session.list_tools()
            assert {t.name for t in listed.tools} == TOOLS
            for t in listed.tools:
                assert t.description
                props = set(t.input_schema.get("properties", {}))
                assert not props & {"tenant", "user", "agent", "scope"}, t.name

            conv = _data(await _call(session, "create_conversation", title="trip"))
            cid = conv["id"]
            q = _data(
                await _call(
                    session,
                    "add_message",
                    conversation_id=cid,
                    role="user",
                    content="Which ferry goes to Lindisfarne?",
                )
            )
            a = _data(
                await _call(
                    session,
                    "add_message",
                    conversation_id=cid,
                    role="assistant",
                    content="None: you walk the causeway at low tide.",
                )
            )
            assert a["parent_id"] == q["id"]

            ctx = _data(await _call(session, "get_context", conversation_id=cid, budget=500))
            assert [m["role"] for m in ctx["messages"]][-2:] == ["user", "assistant"]
            report = ctx["report"]
            assert report["tokens_per_tier"]["recent"] > 0
            assert sum(report["tokens_per_tier"].values()) == report["total_tokens"]
            assert report["dropped"] == 0

            hist = _data(await _call(session, "get_history", conversation_id=cid))
            assert [m["id"] for m in hist["messages"]] == [q["id"], a["id"]]

            queued = _data(await _call(session, "remember_conversation", conversation_id=cid))
            assert queued["job"]["kind"] == "longterm.extract"
            assert queued["job"]["conversation_id"] == cid

            fact = _data(
                await _call(session, "add_fact", content="Walks to islands", category="goal")
            )
            facts = _data(await _call(session, "list_facts"))
            assert [f["id"] for f in facts["items"]] == [fact["id"]]

            hits = _data(await _call(session, "search_memory", query="causeway tide"))
            assert a["id"] in [h["message_id"] for h in hits["hits"]]
            assert all(0 <= h["relevance"] <= 1 for h in hits["hits"])
            assert hits["pending"] == 0
            why = _data(
                await _call(
                    session,
                    "search_memory",
                    query="causeway tide",
                    explain=True,
                    explain_ids=[a["id"], "no-such-message"],
                )
            )
            assert all("cosine" in h["signals"] for h in why["hits"])
            verdicts = {e["id"]: e["reason"] for e in why["explained"]}
            assert verdicts["no-such-message"] == "unknown"
            assert verdicts[a["id"]] in {"returned", "ranked_below_k"}

            empty = _data(await _call(session, "get_working_memory"))
            assert empty == {"exists": False, "conversation_id": None, "version": 0}
            wm = _data(await _call(session, "update_working_memory", content="# tides"))
            assert wm["version"] == 1
            wm = _data(
                await _call(
                    session,
                    "update_working_memory",
                    content="# tides\n- 14:05 low",
                    conversation_id=cid,
                    expected_version=0,
                )
            )
            assert (wm["version"], wm["conversation_id"]) == (1, cid)
            wm = _data(await _call(session, "update_working_memory", content="# tides"))
            assert wm["version"] == 2  # left out: overwrite
            stale = await _call(session, "update_working_memory", content="x", expected_version=7)
            assert stale.is_error
            assert "version 2" in _text(stale)

    # The data landed in alice's scope, and only there.
    with Memory.open(db, settings=Settings(home=tmp_path / "home", worker="off")) as mem:
        alice = Scope("t1", "alice")
        assert [c.id for c in mem.conversations.list(alice).items] == [cid]
        assert [m.content for m in mem.messages.path(alice, cid)][-1].startswith("None: you walk")
        assert [f.content for f in mem.facts.list(alice).items] == ["Walks to islands"]
        assert (mem.working.get(alice).content, mem.working.get(alice).version) == ("# tides", 2)
        assert mem.working.get(alice, conversation_id=cid).version == 1
        for other in (Scope("t1", "bob"), Scope("local", "local"), Scope("t1", "alice", "a1")):
            assert mem.conversations.list(other).items == []
            assert mem.facts.list(other).items == []


# -- streamable HTTP ---------------------------------------------------------------------------


@dataclass(frozen=True)
class Live:
    url: str  # the /mcp endpoint
    base: str
    alice: str
    bob: str
    admin: str
    bob_cid: str
    bob_fact: str


class _Server(uvicorn.Server):
    def install_signal_handlers(self) -> None:  # a thread: the test runner owns signals
        pass


@pytest.fixture
def live(tmp_path: Path) -> Iterator[Live]:
    db = f"sqlite:///{(tmp_path / 'http.db').as_posix()}"
    settings = Settings(home=tmp_path / "home", worker="off")
    with Memory.open(db, settings=settings) as admin_mem:
        alice = admin_mem.keys.create("t1", user="alice")[1]
        bob = admin_mem.keys.create("t1", user="bob")[1]
        admin = admin_mem.keys.create("t1", admin=True)[1]
        # Bob's canaries, in every kind of data a tool can read.
        b = Scope("t1", "bob")
        conv = admin_mem.conversations.create(b, title=f"bob {CANARY}")
        admin_mem.messages.append(b, conv.id, role="user", content=f"my word is {CANARY}, tea")
        fact = admin_mem.facts.add(b, f"Bob's password hint is {CANARY}")
        admin_mem.working.put(b, f"# {CANARY}")
        admin_mem.working.put(b, f"# conv {CANARY}", conversation_id=conv.id)

    memory = AsyncMemory.open(db, settings=settings, embedder=FakeEmbedder())
    config = uvicorn.Config(
        create_app(memory), host="127.0.0.1", port=0, log_level="warning", lifespan="on"
    )
    server = _Server(config)
    thread = threading.Thread(target=server.run, daemon=True)
    thread.start()
    try:
        deadline = time.monotonic() + WAIT_SECONDS
        while not server.started:
            assert thread.is_alive(), "the server thread died"
            assert time.monotonic() < deadline, "the server did not start"
            time.sleep(0.02)
        port = server.servers[0].sockets[0].getsockname()[1]
        base = f"http://127.0.0.1:{port}"
        yield Live(f"{base}/mcp", base, alice, bob, admin, conv.id, fact.id)
    finally:
        server.should_exit = True
        thread.join(timeout=WAIT_SECONDS)
        memory.core.close()


@asynccontextmanager
async def _session(url: str, key: str, **headers: str) -> AsyncIterator[ClientSession]:
    sent = {"Authorization": f"Bearer {key}", **headers}
    async with (
        httpx2.AsyncClient(headers=sent, timeout=30) as http,
        streamable_http_client(url, http_client=http) as (read, write),
        ClientSession(read, write) as session,
    ):
        await session.initialize()
        yield session


async def test_http_tools_act_only_as_the_keys_user(live: Live) -> None:
    async with _session(live.url, live.alice) as s:
        assert {t.name for t in (await s.list_tools()).tools} == TOOLS
        shown: list[str] = []

        async def call(tool: str, **args: Any) -> CallToolResult:
            result = await _call(s, tool, **args)
            shown.append(_text(result))
            return result

        cid = _data(await call("create_conversation", title="mine"))["id"]
        _data(await call("add_message", conversation_id=cid, role="user", content="I like tea"))
        listed = _data(await call("list_conversations"))
        assert [c["id"] for c in listed["items"]] == [cid]
        _data(await call("get_history", conversation_id=cid))
        ctx = _data(await call("get_context", conversation_id=cid, query=f"{CANARY} tea"))
        assert ctx["messages"]
        near = _data(await call("search_memory", query=CANARY))["hits"]  # vectors: always some
        assert {h["conversation_id"] for h in near} <= {cid}
        tea = _data(await call("search_memory", query="tea", k=50))["hits"]
        assert {h["conversation_id"] for h in tea} == {cid}
        assert _data(await call("list_facts", status="all"))["items"] == []
        assert not _data(await call("get_working_memory"))["exists"]
        assert _data(await call("memory_health"))["sizes"]["active"] == 0

        # Bob's ids are unknown to alice: errors, and bob's data stays as it was.
        for tool, args in [
            ("get_history", {"conversation_id": live.bob_cid}),
            ("get_context", {"conversation_id": live.bob_cid}),
            ("search_memory", {"query": "tea", "conversation_id": live.bob_cid}),
            ("get_working_memory", {"conversation_id": live.bob_cid}),
            ("add_message", {"conversation_id": live.bob_cid, "role": "user", "content": "hi"}),
            ("forget_fact", {"fact_id": live.bob_fact}),
            ("remember_conversation", {"conversation_id": live.bob_cid}),
        ]:
            assert (await call(tool, **args)).is_error, tool
        assert not any(CANARY in text for text in shown)

    # The control: the canaries are there for bob, through his key or an admin key naming him.
    async with _session(live.url, live.bob) as s:
        hits = _data(await _call(s, "search_memory", query=CANARY))["hits"]
        assert CANARY in hits[0]["content"]
        history = _data(await _call(s, "get_history", conversation_id=live.bob_cid))
        assert [m["content"] for m in history["messages"]] == [f"my word is {CANARY}, tea"]
    async with _session(live.url, live.admin, **{"X-Memstrata-User": "bob"}) as s:
        facts = _data(await _call(s, "list_facts"))["items"]
        assert [f["id"] for f in facts] == [live.bob_fact]
        # The two clocks: each fact shows them; as of 2000 nothing was true, as known then
        # or later; searches and contexts as of then see no message.
        assert facts[0]["valid_from"] == facts[0]["recorded_at"]
        past = "2000-01-01T00:00:00Z"
        assert _data(await _call(s, "list_facts", as_of=past))["items"] == []
        later = {"as_of": past, "known_at": "2100-01-01T00:00:00Z"}
        assert _data(await _call(s, "list_facts", **later))["items"] == []
        future = _data(await _call(s, "list_facts", as_of="2100-01-01T00:00:00Z"))["items"]
        assert [f["id"] for f in future] == [live.bob_fact]
        assert _data(await _call(s, "search_memory", query=CANARY, as_of=past))["hits"] == []
        ctx_then = _data(
            await _call(s, "get_context", conversation_id=live.bob_cid, budget=500, as_of=past)
        )
        assert ctx_then["report"]["tokens_per_tier"].get("facts", 0) == 0
        assert (await _call(s, "list_facts", as_of="someday")).is_error
        assert _data(await _call(s, "memory_health"))["sizes"]["active"] == 1


async def test_http_errors(live: Live) -> None:
    async with _session(live.url, live.alice) as s:
        missing = await _call(s, "get_history", conversation_id=UNKNOWN_ID)
        assert missing.is_error
        assert f"conversation {UNKNOWN_ID} not found" in _text(missing)
        bad = await _call(s, "search_memory", query="tea", k=0)
        assert bad.is_error

    init = {
        "jsonrpc": "2.0",
        "id": 1,
        "method": "initialize",
        "params": {
            "protocolVersion": "2025-06-18",
            "capabilities": {},
            "clientInfo": {"name": "t", "version": "0"},
        },
    }
    accept = {"Accept": "application/json, text/event-stream"}
    async with httpx.AsyncClient(base_url=live.base, trust_env=False, timeout=30) as c:
        for headers in ({}, {"Authorization": "Bearer msk_nope"}, {"Authorization": "Basic x"}):
            r = await c.post("/mcp", json=init, headers={**accept, **headers})
            assert r.status_code == 401, r.text
            assert r.headers["content-type"].startswith("application/problem+json")
            assert r.headers["www-authenticate"] == "Bearer"
            assert r.json()["code"] == "unauthorized"
        # An admin key must name the user, as on the REST routes.
        r = await c.post(
            "/mcp", json=init, headers={**accept, "Authorization": f"Bearer {live.admin}"}
        )
        assert r.status_code == 422, r.text
        assert r.json()["field"] == "X-Memstrata-User"
        # A user key works without the SDK too (plain JSON answers).
        r = await c.post(
            "/mcp", json=init, headers={**accept, "Authorization": f"Bearer {live.alice}"}
        )
        assert r.status_code == 200, r.text
        assert r.json()["result"]["serverInfo"]["name"] == "memstrata"
        # Not part of the REST API's document.
        paths = (await c.get("/openapi.json")).json()["paths"]
        assert not [p for p in paths if p.startswith("/mcp")]
