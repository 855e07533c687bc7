"""In-process request metrics, exposed as Prometheus text on ``/metrics``.

Requests are counted and timed by method, route template (``/v1/conversations/{cid}``,
never the raw path, so the label set stays small) and status. Requests that
match no route share the template ``unmatched``.
"""

from __future__ import annotations

import threading
import time
from collections import defaultdict

from starlette.types import ASGIApp, Message, Receive, Scope, Send

__all__ = ["Metrics", "MetricsMiddleware"]

Key = tuple[str, str, str]


def _label(value: str) -> str:
    return value.replace("\\", "\\\\").replace('"', '\\"').replace("\n", "\\n")


class Metrics:
    """Counters for one application; thread-safe because handlers may run in threads."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._count: defaultdict[Key, int] = defaultdict(int)
        self._seconds: defaultdict[Key, float] = defaultdict(float)

    def observe(self, method: str, route: str, status: int, seconds: float) -> None:
        key = (method, route, str(status))
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
