"""FakeOpenAIServer: the OpenAI SDK client talks to a FakeLLM over real HTTP on 127.0.0.1."""

from __future__ import annotations

import json
import re
from pathlib import Path
from typing import Any

import httpx
import pytest

from memstrata import BackendUnavailable, Memory, Scope
from memstrata.config import Settings
from memstrata.llm import OpenAICompatibleLLM
from memstrata.testing import FakeLLM, FakeOpenAIServer
from support import Models

CHAT = [
    {"role": "system", "content": "Be brief."},
    {"role": "user", "content": "What day is the meeting?"},
]


@pytest.fixture(autouse=True)
def _no_proxy(monkeypatch: pytest.MonkeyPatch) -> None:
    # A proxy configured on the machine must not capture requests to the local server.
    for name in ("HTTP_PROXY", "HTTPS_PROXY", "ALL_PROXY", "http_proxy", "https_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("NO_PROXY", "127.0.0.1,localhost")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def _client(server: FakeOpenAIServer, **options: Any) -> OpenAICompatibleLLM:
    return OpenAICompatibleLLM(
        model="served-model", base_url=server.base_url, retries=0, timeout_s=10, **options
    )


def test_sync_client_gets_the_fake_reply() -> None:
    llm = FakeLLM(["Thursday at 10.", "Friday."])
    with FakeOpenAIServer(llm) as server:
        assert re.fullmatch(r"http://127\.0\.0\.1:\d+/v1", server.base_url)
        client = _client(server)
        assert client.complete(CHAT) == "Thursday at 10."
        assert client.complete(CHAT, model="other-model") == "Friday."
    assert [(c.model, c.purpose) for c in llm.calls] == [
        ("served-model", "http"),
        ("other-model", "http"),
    ]
    assert llm.calls[0].messages == CHAT
    assert [r["model"] for r in server.requests] == ["served-model", "other-model"]
    assert server.requests[0]["messages"] == CHAT


@pytest.mark.anyio
async def test_async_client_gets_the_fake_reply() -> None:
    llm = FakeLLM(lambda messages: f"{len(messages)} messages")
    with FakeOpenAIServer(llm) as server:
        client = _client(server)
        assert await client.acomplete(CHAT) == "2 messages"
        assert await client.acomplete(CHAT[1:]) == "1 messages"
    assert len(server.requests) == 2
    assert [c.purpose for c in llm.calls] == ["http", "http"]


def test_response_has_the_openai_shape() -> None:
    with FakeOpenAIServer(FakeLLM(["three word reply"])) as server:
        r = httpx.post(
            f"{server.base_url}/chat/completions",
            json={"model": "m1", "messages": CHAT},
            trust_env=False,
        )
    assert r.status_code == 200
    assert r.headers["content-type"] == "application/json"
    body = r.json()
    assert body["object"] == "chat.completion"
    assert body["id"]
    assert isinstance(body["created"], int)
    assert body["model"] == "m1"
    [choice] = body["choices"]
    assert choice["message"] == {"role": "assistant", "content": "three word reply"}
    assert choice["finish_reason"] == "stop"
    usage = body["usage"]
    assert usage["completion_tokens"] == 3
    assert usage["prompt_tokens"] == 7  # "Be brief." + "What day is the meeting?" in words
    assert usage["total_tokens"] == 10


def test_default_model_echoes_and_ids_differ() -> None:
    with FakeOpenAIServer() as server:
        bodies = [
            httpx.post(
                f"{server.base_url}/chat/completions",
                json={"model": "m", "messages": CHAT},
                trust_env=False,
            ).json()
            for _ in range(2)
        ]
    assert (
        bodies[0]["choices"][0]["message"]["content"] == "fake reply to: What day is the meeting?"
    )
    assert bodies[0]["id"] != bodies[1]["id"]


def test_other_paths_404_and_bad_bodies_400() -> None:
    with FakeOpenAIServer(FakeLLM(["never"])) as server:
        root = f"http://127.0.0.1:{server.port}"
        with httpx.Client(base_url=root, trust_env=False) as http:
            for r in (
                http.get("/v1/models"),
                http.post("/v1/completions", json={"model": "m", "prompt": "x"}),
                http.get("/v1/chat/completions"),
            ):
                assert r.status_code == 404
                assert "no route" in r.json()["error"]["message"]
            bad = http.post(
                "/v1/chat/completions",
                content=b"{not json",
                headers={"Content-Type": "application/json"},
            )
            assert bad.status_code == 400
            assert "not valid JSON" in bad.json()["error"]["message"]
            body: object
            for body in ([], {"messages": CHAT}, {"model": "m", "messages": "hi"}):
                r = http.post("/v1/chat/completions", content=json.dumps(body).encode())
                assert r.status_code == 400, body
            r = http.post(
                "/v1/chat/completions", json={"model": "m", "messages": CHAT, "stream": True}
            )
            assert r.status_code == 400
            assert "streaming" in r.json()["error"]["message"]
    assert server.llm.calls == []
    assert server.requests == []  # only bodies that reached the model are kept


def test_model_failure_reaches_the_client_as_backend_unavailable() -> None:
    llm = FakeLLM(["recovered"])
    llm.fail_next(1, TimeoutError("model overloaded"))
    with FakeOpenAIServer(llm) as server:
        client = _client(server)
        with pytest.raises(BackendUnavailable, match="model overloaded"):
            client.complete(CHAT, purpose="test")
        assert client.complete(CHAT) == "recovered"


def test_stopped_server_has_no_address_and_cannot_start_twice() -> None:
    server = FakeOpenAIServer()
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.base_url
    with server, pytest.raises(RuntimeError, match="already running"):
        server.start()
    with pytest.raises(RuntimeError, match="not running"):
        _ = server.port


def test_long_term_extraction_through_http(tmp_path: Path, models: Models) -> None:
    reply = {
        "profile": {"workContext": "Runs the billing team."},
        "newFacts": [{"content": "User drinks tea", "category": "preference", "confidence": 0.9}],
    }
    llm = FakeLLM([json.dumps(reply)])
    scope = Scope("t", "u")
    with FakeOpenAIServer(llm) as server:
        mem = Memory.open(
            f"sqlite:///{(tmp_path / 'm.db').as_posix()}",
            settings=Settings(home=tmp_path, worker="off"),
        )
        try:
            models(mem, facts_embedder=None, facts_llm=_client(server))
            cid = mem.conversations.create(scope).id
            mem.messages.append(scope, cid, role="user", content="I drink tea every morning.")
            mem.messages.append(scope, cid, role="assistant", content="Noted.")
            result = mem.longterm.flush(scope, cid)
            facts = [f.content for f in mem.facts.list(scope).items]
        finally:
            mem.close()
    assert result.outcome == "applied"
    assert facts == ["User drinks tea"]
    [request] = server.requests
    assert "I drink tea every morning." in request["messages"][-1]["content"]
