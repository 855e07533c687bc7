"""Regression tests of issue 21's findings at the edge (REST, MCP arguments, JSON, serving).

Each test is named after the finding it pins (``test_finding_NN_...``); docs/reliability.md
lists them under "Hardening (issue 21): edge".
"""

from __future__ import annotations

import json
import logging
import random
import shlex
import string
from collections.abc import AsyncIterator, Iterator
from pathlib import Path
from typing import Any

import httpx
import pytest
from fastapi import FastAPI

from memstrata import AsyncMemory, Memory, Scope
from memstrata.config import Settings
from memstrata.errors import BackendUnavailable, InvalidInput
from memstrata.server import create_app
from memstrata.storage.plan import Exec, write
from support import closed_by_server, connect_to, healthy_again, postgres_schema, postgres_url_for

pytestmark = pytest.mark.anyio

NON_FINITE = ("NaN", "Infinity", "-Infinity")


def bearer(key: str) -> dict[str, str]:
    return {"Authorization": f"Bearer {key}"}


def _raw(client: httpx.AsyncClient, method: str, url: str, text: str, key: str) -> Any:
    headers = bearer(key) | {"content-type": "application/json"}
    return client.request(method, url, content=text.encode("utf-8"), headers=headers)


# -- finding 1: NaN / Infinity ---------------------------------------------------------------


@pytest.mark.parametrize("constant", NON_FINITE)
async def test_finding_01_issue_repro_refused_and_listing_still_works(
    client: httpx.AsyncClient, keys: Any, constant: str, problem: Any
) -> None:
    r = await _raw(
        client, "POST", "/v1/conversations", f'{{"metadata":{{"a":{constant}}}}}', keys.alice
    )
    body = problem(r, 422, "invalid_input")
    assert "not a JSON number" in body["detail"]
    assert r.headers["x-request-id"]
    listed = await client.get("/v1/conversations", headers=bearer(keys.alice))
    assert listed.status_code == 200, listed.text
    assert listed.json()["items"] == []  # nothing was written


async def _conversation(client: httpx.AsyncClient, key: str) -> str:
    r = await client.post("/v1/conversations", json={}, headers=bearer(key))
    assert r.status_code == 201, r.text
    return str(r.json()["id"])


def _json_routes(cid: str, poison: str) -> list[tuple[str, str, str]]:
    """Every route that stores free-form JSON, with ``poison`` where a value goes."""
    return [
        ("POST", "/v1/conversations", f'{{"metadata":{{"a":{poison}}}}}'),
        ("PATCH", f"/v1/conversations/{cid}", f'{{"metadata":{{"a":[1,{poison}]}}}}'),
        (
            "POST",
            f"/v1/conversations/{cid}/messages",
            f'{{"role":"user","content":"hi","metadata":{{"a":{poison}}}}}',
        ),
        ("PUT", "/v1/working-memory", f'{{"format":"json","content":{{"a":{poison}}}}}'),
        ("PUT", f"/v1/conversations/{cid}/plan", f'{{"document":{{"steps":[{poison}]}}}}'),
        ("PUT", "/v1/checkpoints/graph/run1", f'{{"state":{{"x":{poison}}}}}'),
        ("PUT", f"/v1/conversations/{cid}/runs/run1/snapshot", f'{{"data":{poison}}}'),
        (
            "POST",
            f"/v1/conversations/{cid}/iterations",
            f'{{"task":"t","outcome":"ok","detail":{{"score":{poison}}}}}',
        ),
        ("POST", f"/v1/conversations/{cid}/context", f'{{"budget":{poison}}}'),
        ("POST", "/v1/recall/search", f'{{"query":"q","k":{poison}}}'),
        ("POST", "/v1/facts", f'{{"content":"likes tea","confidence":{poison}}}'),
        (
            "POST",
            "/mcp",
            '{"jsonrpc":"2.0","id":1,"method":"tools/call","params":{"name":'
            f'"update_working_memory","arguments":{{"content":"x","expected_version":{poison}}}}}}}',
        ),
    ]


async def _reads(client: httpx.AsyncClient, key: str, cid: str) -> None:
    """The reads the issue saw fail after a poisoned write: all answer 200 (or 404: none)."""
    for url in (
        "/v1/conversations",
        f"/v1/conversations/{cid}",
        f"/v1/conversations/{cid}/messages",
        f"/v1/conversations/{cid}/history",
        f"/v1/conversations/{cid}/iterations",
        "/v1/working-memory",
        f"/v1/conversations/{cid}/plan",
        f"/v1/conversations/{cid}/runs/run1/snapshot",
        "/v1/checkpoints/graph/run1",
    ):
        r = await client.get(url, headers=bearer(key))
        assert r.status_code in (200, 404), (url, r.status_code, r.text)


@pytest.mark.parametrize("constant", NON_FINITE)
async def test_finding_01_every_json_route_refuses_non_finite(
    client: httpx.AsyncClient, keys: Any, constant: str, problem: Any
) -> None:
    cid = await _conversation(client, keys.alice)
    for method, url, text in _json_routes(cid, constant):
        r = await _raw(client, method, url, text, keys.alice)
        problem(r, 422, "invalid_input")
    await _reads(client, keys.alice, cid)
    # Nothing was half-written: one conversation, no message, no metadata.
    r = await client.get(f"/v1/conversations/{cid}", headers=bearer(keys.alice))
    assert r.json()["metadata"] == {}
    r = await client.get(f"/v1/conversations/{cid}/messages", headers=bearer(keys.alice))
    assert r.json()["items"] == []


async def test_finding_01_a_body_typed_as_text_is_checked_too(
    client: httpx.AsyncClient, keys: Any, problem: Any
) -> None:
    cid = await _conversation(client, keys.alice)
    for text in (
        '{"role":"user","content":"x","metadata":{"a":NaN}}',
        '{"role":"user","content":"\\ud800"}',
    ):
        r = await client.post(
            f"/v1/conversations/{cid}/messages",
            content=text.encode(),
            headers=bearer(keys.alice) | {"content-type": "text/plain"},
        )
        problem(r, 422, "invalid_input")
    r = await client.get(f"/v1/conversations/{cid}/messages", headers=bearer(keys.alice))
    assert r.json()["items"] == []


def test_finding_01_python_api_refuses_non_finite(tmp_path: Path) -> None:
    scope = Scope("t1", "alice")
    with Memory.open(f"sqlite:///{tmp_path / 'api.db'}") as mem:
        conv = mem.conversations.create(scope)
        for value in (float("nan"), float("inf"), float("-inf")):
            with pytest.raises(InvalidInput):
                mem.conversations.create(scope, metadata={"a": value})
            with pytest.raises(InvalidInput):
                mem.working.put(scope, {"a": [value]})
            with pytest.raises(InvalidInput):
                mem.plans.put(scope, conv.id, {"steps": [value]})
            with pytest.raises(InvalidInput):
                mem.messages.append(scope, conv.id, role="user", content="x", metadata={"v": value})
        assert len(mem.conversations.list(scope).items) == 1


async def test_finding_01_mcp_update_working_memory_refuses_non_finite(tmp_path: Path) -> None:
    from mcp import Client
    from mcp.server.mcpserver.exceptions import ToolError

    from memstrata.mcpserver.server import build_server, fixed_scope
    from memstrata.mcpserver.tools import MemoryTools

    mem = AsyncMemory.open(
        f"sqlite:///{(tmp_path / 'mcp.db').as_posix()}",
        settings=Settings(home=tmp_path, worker="off"),
    )
    scope = Scope("t1", "alice")
    try:
        await mem.working.put(scope, {"task": "pack"}, json_schema={"type": "object"})
        async with Client(build_server(mem, fixed_scope(scope))) as client:
            for constant in NON_FINITE:
                bad = await client.call_tool(
                    "update_working_memory", {"content": f'{{"a": {constant}}}'}
                )
                assert bad.is_error
            ok = await client.call_tool("get_working_memory", {})
            assert not ok.is_error
        assert (await mem.working.get(scope)).content == {"task": "pack"}
        # Arguments that reach a tool past the SDK's own validation are checked too (stdio
        # has no HTTP edge): a non-finite number, a lone surrogate, over-deep nesting.
        tools = MemoryTools(mem, fixed_scope(scope))
        for bad_args, why in (
            ({"content": "likes tea", "confidence": float("nan")}, "not a JSON number"),
            ({"content": "likes \ud800"}, "lone UTF-16 surrogate"),
        ):
            with pytest.raises(ToolError, match=why):
                await tools.add_fact(None, **bad_args)  # type: ignore[arg-type]
        with pytest.raises(ToolError, match="nested deeper"):
            await tools.search_memory(None, query="x", conversation_id=_deep(70))  # type: ignore[arg-type]
        assert (await mem.facts.list(scope)).items == []
    finally:
        await mem.close()


def _deep(depth: int) -> list[Any]:
    value: list[Any] = []
    for _ in range(depth):
        value = [value]
    return value


# Rows written before the checks existed: planted straight into the tables.

_PLANTS = (
    ("conversations", "metadata", '{"a":NaN,"b":1}'),
    ("messages", "metadata", '{"a":-Infinity}'),
)


def _plant(mem: Memory, scope: Scope) -> str:
    conv = mem.conversations.create(scope, metadata={"a": 1})
    mem.messages.append(scope, conv.id, role="user", content="hello", metadata={"a": 1})
    mem.working.put(scope, {"a": 1})
    mem.plans.put(scope, conv.id, {"a": 1})

    def op():  # type: ignore[no-untyped-def]
        for table, column, value in _PLANTS:
            yield Exec(f"UPDATE {table} SET {column} = ?", (value,))
        yield Exec("UPDATE working_memory SET content = ?", ('{"a":NaN}',))
        yield Exec("UPDATE plans SET document = ?", ('{"a":Infinity}',))

    mem.core.engine.run(write(op))
    return conv.id


@pytest.fixture(params=["sqlite", "postgres"])
def store_url(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[str]:
    if request.param == "sqlite":
        yield f"sqlite:///{(tmp_path / 'planted.db').as_posix()}"
        return
    with postgres_schema() as schema:
        yield postgres_url_for(schema)


@pytest.fixture
async def store_client(
    store_url: str, tmp_path: Path
) -> AsyncIterator[tuple[httpx.AsyncClient, Memory]]:
    settings = Settings(db=store_url, home=tmp_path, worker="off")
    sync = Memory.open(store_url, settings=settings)
    amem = AsyncMemory.open(store_url, settings=settings)
    transport = httpx.ASGITransport(app=create_app(amem, settings), raise_app_exceptions=False)
    try:
        async with httpx.AsyncClient(transport=transport, base_url="http://memstrata.test") as c:
            yield c, sync
    finally:
        await amem.close()
        sync.close()


async def test_finding_01_rows_holding_nan_still_read(
    store_client: tuple[httpx.AsyncClient, Memory],
) -> None:
    client, mem = store_client
    scope = Scope("t1", "alice")
    key = mem.keys.create("t1", user="alice")[1]
    cid = _plant(mem, scope)
    await _reads(client, key, cid)
    r = await client.get("/v1/conversations", headers=bearer(key))
    assert r.status_code == 200
    assert r.json()["items"][0]["metadata"] == {"a": None, "b": 1}
    r = await client.get(f"/v1/conversations/{cid}/messages", headers=bearer(key))
    assert r.json()["items"][0]["metadata"] == {"a": None}
    r = await client.get("/v1/working-memory", headers=bearer(key))
    assert r.status_code == 200
    assert r.json()["content"] == {"a": None}
    r = await client.get(f"/v1/conversations/{cid}/plan", headers=bearer(key))
    assert r.status_code == 200
    assert r.json()["document"] == {"a": None}
    r = await client.post(f"/v1/conversations/{cid}/context", json={}, headers=bearer(key))
    assert r.status_code == 200, r.text


# -- finding 4: deep nesting, lone surrogates ------------------------------------------------


async def test_finding_04_deep_nesting_and_lone_surrogates_answer_422(
    client: httpx.AsyncClient, keys: Any, problem: Any
) -> None:
    cid = await _conversation(client, keys.alice)
    deep = "[" * 5000 + "]" * 5000
    r = await _raw(
        client, "PUT", f"/v1/conversations/{cid}/plan", f'{{"document":{deep}}}', keys.alice
    )
    assert "nested deeper than 64" in problem(r, 422, "invalid_input")["detail"]
    # The body nested 65 deep (its object and 64 arrays) is refused; 64 deep is accepted.
    over = "[" * 64 + "]" * 64
    r = await _raw(
        client, "PUT", f"/v1/conversations/{cid}/plan", f'{{"document":{over}}}', keys.alice
    )
    problem(r, 422, "invalid_input")
    at = "[" * 63 + "]" * 63
    r = await _raw(
        client, "PUT", f"/v1/conversations/{cid}/plan", f'{{"document":{at}}}', keys.alice
    )
    assert r.status_code == 200, r.text
    lone = '"\\ud800"'
    for method, url, text in [
        ("PUT", "/v1/working-memory", f'{{"content":{lone}}}'),
        ("PUT", f"/v1/conversations/{cid}/plan", f'{{"document":{{"k":{lone}}}}}'),
        ("PUT", "/v1/checkpoints/graph/run1", f'{{"state":[{lone}]}}'),
        ("PUT", f"/v1/conversations/{cid}/runs/run1/snapshot", f'{{"data":{lone}}}'),
        ("POST", f"/v1/conversations/{cid}/context", f'{{"query":{lone}}}'),
        ("POST", "/v1/recall/search", f'{{"query":{lone}}}'),
        ("POST", f"/v1/conversations/{cid}/messages", f'{{"role":"user","content":{lone}}}'),
        ("POST", "/v1/conversations", f'{{"metadata":{{{lone}:1}}}}'),
    ]:
        r = await _raw(client, method, url, text, keys.alice)
        assert "lone UTF-16 surrogate" in problem(r, 422, "invalid_input")["detail"], url
    # A surrogate pair is valid text (one emoji), and bytes that are not UTF-8 are refused.
    r = await _raw(client, "PUT", "/v1/working-memory", '{"content":"\\ud83d\\ude00"}', keys.alice)
    assert r.status_code == 200, r.text
    assert r.json()["content"] == "\U0001f600"
    r = await client.put(
        "/v1/working-memory",
        content=b'{"content":"\xff"}',
        headers=bearer(keys.alice) | {"content-type": "application/json"},
    )
    problem(r, 422, "invalid_input")


def test_finding_04_strict_loads_units() -> None:
    from memstrata import strictjson

    assert strictjson.loads(b'{"a":[1,2.5,"\\u00e9"]}') == {"a": [1, 2.5, "é"]}
    for bad in (b"[NaN]", b'{"a":Infinity}', b"-Infinity", b"[" * 100 + b"]" * 100, b'"\\udfff"'):
        with pytest.raises(InvalidInput):
            strictjson.loads(bad)
    with pytest.raises(InvalidInput):
        strictjson.dumps({"a": "\udc80"})
    assert strictjson.finite({"a": [float("nan"), 1.0], "b": float("-inf")}) == {
        "a": [None, 1.0],
        "b": None,
    }


# -- finding 11: /metrics labels -------------------------------------------------------------


async def test_finding_11_unknown_methods_collapse_to_one_label(client: httpx.AsyncClient) -> None:
    rng = random.Random(11)
    for _ in range(500):
        method = "".join(rng.choices(string.ascii_uppercase, k=12))
        path = "/" + "".join(rng.choices(string.ascii_lowercase, k=8))
        r = await client.request(method, path)
        assert r.status_code in (404, 405)
    text = (await client.get("/metrics")).text
    assert len(text) < 20_000, len(text)
    assert 'method="other",route="unmatched",status="404"} 500' in text
    series = [
        line for line in text.splitlines() if line.startswith("memstrata_http_requests_total{")
    ]
    assert len(series) <= 3, series


# -- finding 13: failed authentications ------------------------------------------------------


@pytest.fixture
def limited_app(amemory: AsyncMemory, db_url: str) -> FastAPI:
    settings = Settings(db=db_url, auth_failure_rate_per_second=0.01, auth_failure_burst=5)
    return create_app(amemory, settings)


def _client_from(app: FastAPI, address: str) -> httpx.AsyncClient:
    transport = httpx.ASGITransport(app=app, raise_app_exceptions=False, client=(address, 40000))
    return httpx.AsyncClient(transport=transport, base_url="http://memstrata.test")


async def test_finding_13_failed_authentications_are_rate_limited_per_address(
    limited_app: FastAPI,
    amemory: AsyncMemory,
    keys: Any,
    problem: Any,
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    lookups = 0
    real = amemory.keys.authenticate

    async def counted(secret: str) -> Any:
        nonlocal lookups
        lookups += 1
        return await real(secret)

    monkeypatch.setattr(amemory.keys, "authenticate", counted)
    async with (
        _client_from(limited_app, "192.0.2.7") as attacker,
        _client_from(limited_app, "192.0.2.8") as other,
    ):
        # Successful authentications take nothing from the address's failures.
        for _ in range(20):
            assert (await attacker.get("/v1/me", headers=bearer(keys.alice))).status_code == 200
        for n in range(5):
            problem(
                await attacker.get("/v1/me", headers=bearer(f"msk_wrong{n}")), 401, "unauthorized"
            )
        before = lookups
        for n in range(50):
            r = await attacker.get("/v1/me", headers=bearer(f"msk_guess{n}"))
            body = problem(r, 429, "rate_limited")
            assert "failed authentications" in body["detail"]
            assert int(r.headers["retry-after"]) >= 1
            assert r.headers["x-request-id"]
        assert lookups == before  # no key lookup once the address is limited
        # /mcp is behind the same keys and the same limit.
        problem(await attacker.post("/mcp", json={}, headers=bearer("msk_x")), 429, "rate_limited")
        # Another address is unaffected, with a good key or a bad one.
        assert (await other.get("/v1/me", headers=bearer(keys.bob))).status_code == 200
        problem(await other.get("/v1/me", headers=bearer("msk_wrong")), 401, "unauthorized")


# -- finding 15: every error is problem JSON with a request id -------------------------------


@pytest.mark.parametrize(
    ("error", "status", "code", "detail"),
    [
        (
            RuntimeError("driver said: relation secret_table does not exist"),
            500,
            "internal",
            "internal server error",
        ),
        (
            BackendUnavailable("postgres: connection to 10.1.2.3 failed: password secret_table"),
            503,
            "backend_unavailable",
            "a backend is unavailable; try again later",
        ),
    ],
)
async def test_finding_15_a_5xx_is_problem_json_with_request_id_and_no_internals(
    client: httpx.AsyncClient,
    amemory: AsyncMemory,
    keys: Any,
    problem: Any,
    monkeypatch: pytest.MonkeyPatch,
    error: Exception,
    status: int,
    code: str,
    detail: str,
) -> None:
    async def broken(*args: Any, **kwargs: Any) -> Any:
        raise error

    monkeypatch.setattr(amemory.conversations, "list", broken)
    r = await client.get(
        "/v1/conversations", headers=bearer(keys.alice) | {"X-Request-Id": "req-15"}
    )
    body = problem(r, status, code)
    assert r.headers["x-request-id"] == "req-15"
    assert "secret_table" not in r.text
    assert "10.1.2.3" not in r.text
    assert body["detail"] == detail


async def test_finding_15_body_parse_errors_answer_422_not_400(
    client: httpx.AsyncClient, keys: Any, problem: Any
) -> None:
    for text in ('{"title": ', "{'title': 1}", '{"title": "x"} trailing', "\x00"):
        r = await _raw(client, "POST", "/v1/conversations", text, keys.alice)
        problem(r, 422, "invalid_input")
        assert r.headers["x-request-id"]


# -- finding 16: ids anchored at both ends ---------------------------------------------------


async def test_finding_16_trailing_newline_fails_the_id_rule(
    client: httpx.AsyncClient, keys: Any, problem: Any, caplog: pytest.LogCaptureFixture
) -> None:
    cid = await _conversation(client, keys.alice)
    caplog.set_level(logging.INFO)
    r = await client.get(
        f"/v1/apps/app%0A/conversations/{cid}/nodes/node/history", headers=bearer(keys.alice)
    )
    assert "app_id" in problem(r, 422, "invalid_input")["detail"]
    r = await client.get(
        f"/v1/apps/app/conversations/{cid}/nodes/node%0A/history", headers=bearer(keys.alice)
    )
    assert "node_id" in problem(r, 422, "invalid_input")["detail"]
    r = await client.get(
        "/v1/conversations", headers=bearer(keys.admin) | {"X-Memstrata-User": "bob\n"}
    )
    problem(r, 422, "invalid_input")
    r = await client.get("/v1/nowhere%0Aforged-line")
    problem(r, 404)
    for record in caplog.records:
        assert "\n" not in record.getMessage(), record.getMessage()
    from memstrata.types import Scope as ScopeType

    with pytest.raises(InvalidInput):
        ScopeType("t1", "alice\n")
    from memstrata.logs import valid_request_id

    assert valid_request_id("abc\n") != "abc\n"


# -- finding 14: no working key in a PostgreSQL first start's log ----------------------------


def _first_start_output(db: str, monkeypatch: pytest.MonkeyPatch, home: Path) -> str:
    import uvicorn
    from typer.testing import CliRunner

    from memstrata.cli import app as cli_app

    def started(self: uvicorn.Server, sockets: object = None) -> None:
        self.started = True  # start-up only, no serving

    monkeypatch.setattr(uvicorn.Server, "run", started)
    monkeypatch.setenv("MEMSTRATA_HOME", str(home))
    done = CliRunner().invoke(cli_app, ["serve", "--db", db, "--port", "0"])
    assert done.exit_code == 0, done.output
    return done.output


def test_finding_14_postgres_first_start_prints_a_hint_not_a_key(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    with postgres_schema() as schema:
        url = postgres_url_for(schema)
        out = _first_start_output(url, monkeypatch, tmp_path)
        assert "msk_" not in out
        # The whole command: the store named, not the default one where it is run.
        assert f"memstrata keys create --db {shlex.quote(url)} --tenant" in out
        with Memory.open(url, settings=Settings(home=tmp_path, worker="off")) as mem:
            assert mem.keys.list(None) == []
    # The embedded default keeps DESIGN's promise: a key for the local user on first start.
    out = _first_start_output(f"sqlite:///{tmp_path / 'local.db'}", monkeypatch, tmp_path)
    assert "msk_" in out
    assert "keys create" not in out


# -- finding 10 (and 15 at the HTTP level): a live `memstrata serve` -------------------------


@pytest.fixture(scope="module", params=["httptools", "h11"])
def live(
    request: pytest.FixtureRequest, tmp_path_factory: pytest.TempPathFactory
) -> Iterator[tuple[str, Path]]:
    """One server per HTTP parser for the module's live tests (each leaves no connection
    open): the guards hold on httptools (the default) and on the h11 fallback alike."""
    from support import memstrata_serve, server_env

    tmp_path = tmp_path_factory.mktemp("live")
    env = server_env(
        home=str(tmp_path),
        serve_http=request.param,
        serve_header_timeout_s="3",
        serve_body_timeout_s="3",
        serve_max_connections="4",
        log_format="text",
    )
    log = tmp_path / "serve.log"
    with memstrata_serve(f"sqlite:///{tmp_path / 'live.db'}", env, log, 90) as (_, base):
        yield base, log


@pytest.mark.server
def test_finding_10_half_sent_requests_are_dropped(live: tuple[str, Path]) -> None:
    base, log = live
    silent = connect_to(base)  # connects and says nothing
    half_headers = connect_to(base)
    half_headers.sendall(b"GET /healthz HTTP/1.1\r\nHost: x\r\nX-Slow: ")
    half_body = connect_to(base)
    half_body.sendall(
        b"POST /v1/conversations HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
        b'Content-Length: 100\r\n\r\n{"title":'
    )
    for sock in (silent, half_headers, half_body):
        with sock:
            assert closed_by_server(sock) == b""
    text = log.read_text()
    assert "its request headers did not arrive in time" in text
    assert "its request body did not arrive in time" in text
    assert httpx.get(base + "/healthz", trust_env=False).status_code == 200


@pytest.mark.server
def test_finding_10_over_the_connection_cap_gets_503_then_recovers(live: tuple[str, Path]) -> None:
    base, _ = live
    idle = [connect_to(base) for _ in range(4)]
    try:
        r = httpx.get(base + "/healthz", trust_env=False, timeout=10)
        assert r.status_code == 503, r.text
        assert r.headers["content-type"].startswith("application/problem+json")
        assert r.headers["x-request-id"]
        assert r.json()["code"] == "over_capacity"
    finally:
        for sock in idle:
            sock.close()
    assert healthy_again(base) == 200


@pytest.mark.server
def test_finding_15_malformed_http_is_problem_json_with_request_id(live: tuple[str, Path]) -> None:
    base, _ = live
    for raw in (
        b"POST /v1/conversations HTTP/1.1\r\nHost: x\r\nContent-Length: abc\r\n\r\n{}",
        b"GET / HTTP/1.1\r\nHost: x\r\nBad Header\r\n\r\n",
    ):
        with connect_to(base) as sock:
            sock.sendall(raw)
            answer = closed_by_server(sock)
        head, _, body = answer.partition(b"\r\n\r\n")
        assert head.startswith(b"HTTP/1.1 400"), answer
        assert b"content-type: application/problem+json" in head.lower()
        assert b"x-request-id: " in head.lower()
        assert json.loads(body)["code"] == "bad_request"


def test_finding_10_repeated_accept_errors_are_logged_once_per_interval(
    caplog: pytest.LogCaptureFixture,
) -> None:
    import time

    from memstrata.server.serving import RepeatFilter

    logger = logging.getLogger("asyncio.test-h21")
    limiter = RepeatFilter(interval_s=0.2)
    logger.addFilter(limiter)
    try:
        with caplog.at_level(logging.ERROR, logger=logger.name):
            for _ in range(1000):
                logger.error(
                    "socket.accept() out of system resource\nsocket: <listening>\n"
                    "exception: [Errno 24] Too many open files"
                )
            assert len(caplog.records) == 1
            time.sleep(0.3)
            logger.error("socket.accept() out of system resource\nsocket: <listening>")
            assert len(caplog.records) == 2
            assert "999 more like it held back" in caplog.records[1].getMessage()
    finally:
        logger.removeFilter(limiter)


async def test_finding_15_driver_messages_never_reach_detail(
    client: httpx.AsyncClient, keys: Any, problem: Any
) -> None:
    import base64

    # An oversized cursor reaches SQLite, whose OverflowError the backend turns into 422.
    huge = base64.urlsafe_b64encode(b"9" * 40).decode().rstrip("=")
    cid = await _conversation(client, keys.alice)
    for url in ("/v1/conversations", f"/v1/conversations/{cid}/messages"):
        r = await client.get(url, params={"cursor": huge}, headers=bearer(keys.alice))
        if r.status_code == 200:
            continue  # a store that bounds cursors itself answers an empty page
        body = problem(r, 422, "invalid_input")
        assert "SQLite" not in body["detail"]
        assert "too large" not in body["detail"]


def test_finding_15_a_translated_driver_error_is_answered_generically(
    amemory: AsyncMemory, db_url: str
) -> None:
    import apsw
    from fastapi.testclient import TestClient

    from memstrata.backends.sqlite import translate

    key = None
    with Memory.open(db_url) as mem:
        key = mem.keys.create("t1", user="alice")[1]

    async def collide(*args: Any, **kwargs: Any) -> Any:
        try:
            raise apsw.ConstraintError("UNIQUE constraint failed: conversations.secret_column")
        except apsw.ConstraintError as exc:
            raise translate(exc) from None

    amemory.conversations.create = collide  # type: ignore[method-assign]
    with TestClient(create_app(amemory, Settings(db=db_url))) as c:
        r = c.post("/v1/conversations", json={}, headers=bearer(key))
    assert r.status_code == 409
    # The backend translates the driver's error into its own words (or the edge replaces
    # them): either way no driver text reaches the client.
    assert r.json()["detail"] in {
        "the request conflicts with data already stored",
        "the write conflicts with a stored row",
    }
    assert "secret_column" not in r.text
    assert "UNIQUE" not in r.text
