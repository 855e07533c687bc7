"""In-process request metrics, exposed as Prometheus text on ``/metrics``.

Requests are counted and timed by method, route template (``/v1/conversations/{cid}``,
never the raw path, so the label set stays small) and status. Requests that
match no route share the template ``unmatched``; a method outside the HTTP ones
the API answers (any token is a valid method name on the wire) shares the method
``other``, so no request, authenticated or not, can add series without bound.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict
from typing import Any

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["Metrics", "MetricsMiddleware", "render_state"]

Key = tuple[str, str, str]

METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})


def method_label(method: str) -> str:
    return method if method in METHODS else "other"


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class Metrics:
    """Counters for one application; thread-safe because handlers may run in threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count: defaultdict[Key, int] = defaultdict(int)
        self._seconds: defaultdict[Key, float] = defaultdict(float)

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        key = (method_label(method), route, str(status))
        with self._lock:
            self._count[key] += 1
            self._seconds[key] += seconds

    def render(self) -> str:
        with self._lock:
            keys = sorted(self._count)
            count = dict(self._count)
            seconds = dict(self._seconds)
        lines = [
            "# HELP memstrata_http_requests_total HTTP requests answered.",
            "# TYPE memstrata_http_requests_total counter",
        ]
        labels = {
            k: f'method="{_label(k[0])}",route="{_label(k[1])}",status="{k[2]}"' for k in keys
        }
        lines += [f"memstrata_http_requests_total{{{labels[k]}}} {count[k]}" for k in keys]
        lines += [
            "# HELP memstrata_http_request_duration_seconds Time spent answering HTTP requests.",
            "# TYPE memstrata_http_request_duration_seconds summary",
        ]
        for k in keys:
            lines.append(
                f"memstrata_http_request_duration_seconds_sum{{{labels[k]}}} {seconds[k]!r}"
            )
            lines.append(f"memstrata_http_request_duration_seconds_count{{{labels[k]}}} {count[k]}")
        return "\n".join(lines) + "\n"


def _family(name: str, kind: str, help_text: str, samples: list[tuple[str, float]]) -> list[str]:
    lines = [f"# HELP {name} {help_text}", f"# TYPE {name} {kind}"]
    lines += [f"{name}{labels} {value!r}" for labels, value in samples]
    return lines


def render_state(jobs: dict[str, Any] | None, usage: dict[str, Any]) -> str:
    """Gauges of the job queue (read at scrape time) and this process's model usage."""
    lines: list[str] = []
    if jobs is not None:
        lines += _family(
            "memstrata_jobs",
            "gauge",
            "Jobs by status (dead: dead letters waiting for a retry).",
            [(f'{{status="{s}"}}', float(n)) for s, n in sorted(jobs["counts"].items())],
        )
        lines += _family(
            "memstrata_jobs_oldest_ready_age_seconds",
            "gauge",
            "How long the oldest due job has waited for a worker.",
            [("", float(jobs["oldest_ready_age_s"]))],
        )
    llm = usage.get("llm", {})
    for name, help_text in (
        ("calls", "LLM calls by purpose."),
        ("errors", "Failed LLM calls by purpose."),
        ("prompt_tokens", "Prompt tokens sent to the LLM (memstrata's tokenizer)."),
        ("completion_tokens", "Completion tokens received from the LLM."),
        ("seconds", "Time spent waiting for the LLM."),
    ):
        samples = [(f'{{purpose="{_label(p)}"}}', v.get(name, 0.0)) for p, v in sorted(llm.items())]
        lines += _family(f"memstrata_llm_{name}_total", "counter", help_text, samples)
    embed = usage.get("embed", {})
    for name, help_text in (
        ("calls", "Embedder calls."),
        ("errors", "Failed embedder calls."),
        ("texts", "Texts embedded."),
        ("seconds", "Time spent embedding."),
    ):
        lines += _family(
            f"memstrata_embed_{name}_total", "counter", help_text, [("", embed.get(name, 0.0))]
        )
    return "\n".join(lines) + "\n"


class MetricsMiddleware:
    def __init__(self, app: ASGIApp, metrics: Metrics) -> None:
        self.app = app
        self.metrics = metrics

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        status = 500  # what the client sees if the application raises before answering
        start = time.perf_counter()

        async def send_status(message: Message) -> None:
            nonlocal status
            if message["type"] == "http.response.start":
                status = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_status)
        finally:
            # The router records the matched route in the scope it was handed.
            route = getattr(scope.get("route"), "path", None)
            self.metrics.observe(
                scope["method"],
                route if isinstance(route, str) else "unmatched",
                status,
                time.perf_counter() - start,
            )
