"""A tiny OpenAI-compatible chat endpoint that answers with a :class:`FakeLLM`.

``FakeLLM`` stands in for a model inside the process. Some things can only be tested
across a real HTTP hop: the ``openai`` SDK client (:class:`memstrata.llm.OpenAICompatibleLLM`),
a server or worker started from settings (``MEMSTRATA_LLM_BASE_URL``), another process.
:class:`FakeOpenAIServer` serves ``POST /v1/chat/completions`` on 127.0.0.1 (an
ephemeral port) from a daemon thread, with the standard library only::

    with FakeOpenAIServer(FakeLLM(["hello"])) as server:
        llm = OpenAICompatibleLLM(model="m", base_url=server.base_url)
        assert llm.complete([{"role": "user", "content": "hi"}]) == "hello"

It never touches any other host. Every request body it parsed is kept in
:attr:`FakeOpenAIServer.requests`; the wrapped model's own record is ``llm.calls``.
"""

from __future__ import annotations

import itertools
import json
import threading
import time
from collections.abc import Mapping
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from types import TracebackType
from typing import Any

from memstrata.testing.fakes import FakeLLM

__all__ = ["FakeOpenAIServer"]

CHAT_PATH = "/v1/chat/completions"


def _words(content: Any) -> int:
    """A rough token count: words of a string content or of the text parts of a list."""
    if isinstance(content, str):
        return len(content.split())
    if isinstance(content, list):
        return sum(_words(p.get("text")) for p in content if isinstance(p, Mapping))
    return 0


def _error(message: str, kind: str, code: str) -> dict[str, Any]:
    """The OpenAI error envelope, so the SDK reports the message as it would a real one."""
    return {"error": {"message": message, "type": kind, "param": None, "code": code}}


def _check(body: object) -> str | None:
    """Why a parsed body is no chat completion request, or None."""
    if not isinstance(body, dict):
        return "the request body must be a JSON object"
    if not isinstance(body.get("model"), str) or not body["model"]:
        return "model must be a non-empty string"
    messages = body.get("messages")
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        return "messages must be a list of objects"
    if body.get("stream"):
        return "streaming is not supported by this fake server"
    return None


class FakeOpenAIServer:
    """``POST /v1/chat/completions`` answered by ``llm`` (default: an echoing FakeLLM).

    Start with ``with`` (or :meth:`start` / :meth:`stop`). Answers: 200 with the reply
    in the OpenAI response shape; 400 for a body that is not a chat request; 404 for any
    other path; 500 when the model raises (e.g. after ``llm.fail_next()``).
    """

    def __init__(self, llm: FakeLLM | None = None) -> None:
        self.llm = llm if llm is not None else FakeLLM()
        self.requests: list[dict[str, Any]] = []
        self._ids = itertools.count(1)
        self._lock = threading.Lock()
        self._httpd: ThreadingHTTPServer | None = None
        self._thread: threading.Thread | None = None

    # -- life cycle -----------------------------------------------------------------------

    def start(self) -> FakeOpenAIServer:
        if self._httpd is not None:
            raise RuntimeError("FakeOpenAIServer is already running")
        httpd = ThreadingHTTPServer(("127.0.0.1", 0), _handler_for(self))
        httpd.daemon_threads = True  # a client that hangs must not keep the test process alive
        self._httpd = httpd
        self._thread = threading.Thread(
            # A short poll makes stop() quick; the default half second adds up across tests.
            target=httpd.serve_forever,
            kwargs={"poll_interval": 0.02},
            name="fake-openai-server",
            daemon=True,
        )
        self._thread.start()
        return self

    def stop(self) -> None:
        httpd, thread = self._httpd, self._thread
        self._httpd = self._thread = None
        if httpd is not None:
            httpd.shutdown()
            httpd.server_close()
        if thread is not None:
            thread.join(timeout=5)

    def __enter__(self) -> FakeOpenAIServer:
        return self.start()

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.stop()

    @property
    def port(self) -> int:
        if self._httpd is None:
            raise RuntimeError("FakeOpenAIServer is not running")
        return int(self._httpd.server_address[1])

    @property
    def base_url(self) -> str:
        """What an OpenAI client takes as ``base_url``: ``http://127.0.0.1:PORT/v1``."""
        return f"http://127.0.0.1:{self.port}/v1"

    # -- answering ------------------------------------------------------------------------

    def answer(self, body: dict[str, Any]) -> dict[str, Any]:
        """The chat completion for a checked request body (raises what the model raises)."""
        with self._lock:
            self.requests.append(body)
            number = next(self._ids)
        messages = body["messages"]
        reply = self.llm.complete(messages, model=body["model"], purpose="http")
        prompt = sum(_words(m.get("content")) for m in messages)
        completion = _words(reply)
        return {
            "id": f"chatcmpl-fake-{number}",
            "object": "chat.completion",
            "created": int(time.time()),
            "model": body["model"],
            "choices": [
                {
                    "index": 0,
                    "message": {"role": "assistant", "content": reply},
                    "finish_reason": "stop",
                }
            ],
            "usage": {
                "prompt_tokens": prompt,
                "completion_tokens": completion,
                "total_tokens": prompt + completion,
            },
        }


def _handler_for(server: FakeOpenAIServer) -> type[BaseHTTPRequestHandler]:
    class Handler(BaseHTTPRequestHandler):
        # HTTP/1.1 keeps the SDK's connection alive between calls; every answer has a length.
        protocol_version = "HTTP/1.1"

        def log_message(self, format: str, *args: Any) -> None:
            """Quiet: a test's output is not the place for an access log."""

        def _send(self, status: int, payload: dict[str, Any]) -> None:
            data = json.dumps(payload).encode()
            self.send_response(status)
            self.send_header("Content-Type", "application/json")
            self.send_header("Content-Length", str(len(data)))
            self.end_headers()
            self.wfile.write(data)

        def _read_body(self) -> bytes:
            length = int(self.headers.get("Content-Length") or 0)
            return self.rfile.read(length) if length > 0 else b""

        def _not_found(self) -> None:
            self._read_body()  # drain it, so the kept-alive connection stays usable
            message = f"no route for {self.command} {self.path}"
            self._send(404, _error(message, "invalid_request_error", "not_found"))

        def do_GET(self) -> None:
            self._not_found()

        def do_PUT(self) -> None:
            self._not_found()

        def do_DELETE(self) -> None:
            self._not_found()

        def do_POST(self) -> None:
            if self.path.split("?", 1)[0] != CHAT_PATH:
                self._not_found()
                return
            raw = self._read_body()
            try:
                body = json.loads(raw)
            except (UnicodeDecodeError, json.JSONDecodeError) as exc:
                message = f"the request body is not valid JSON: {exc}"
                self._send(400, _error(message, "invalid_request_error", "invalid_json"))
                return
            problem = _check(body)
            if problem is not None:
                self._send(400, _error(problem, "invalid_request_error", "invalid_request"))
                return
            try:
                answer = server.answer(body)
            except Exception as exc:  # the model's failure, reported like a provider's 500
                message = f"{type(exc).__name__}: {exc}"
                self._send(500, _error(message, "server_error", "model_failed"))
                return
            self._send(200, answer)

    return Handler
