"""How ``memstrata serve`` holds connections: uvicorn's HTTP protocol with timeouts and a cap.

uvicorn by itself waits forever for a request's headers or body, accepts any number of
connections, answers malformed HTTP in plain text and logs every failed ``accept()``.
:class:`GuardedHttpToolsProtocol` (on httptools, the C parser the ``server`` extra installs:
it costs a fraction of the pure-Python h11's CPU per request) and :class:`GuardedH11Protocol`
(h11, used when httptools is absent) add, per connection:

- a header deadline: a connection must send a request's complete headers within
  ``serve_header_timeout_s`` of connecting (or of its previous answer), else it is closed;
- a body deadline: the body must arrive within ``serve_body_timeout_s`` of the headers,
  else the connection is closed (the application sees the client go away);
- a connection cap: a request on a connection over ``serve_max_connections`` is answered
  503 problem JSON and the connection closed (past twice the cap, connections are closed
  at once, so a flood cannot take the process's file descriptors);
- a cap per client address (``serve_max_connections_per_address``), so one client, with a
  key or without, cannot hold every connection: a connection over it has one second to
  send its request, which is answered 429 problem JSON and the connection closed (past
  twice that cap, the address's connections are closed at once);
- problem JSON with an ``X-Request-Id`` for malformed HTTP (400), instead of plain text.

Deadlines are counted once per request, never reset by a trickle of bytes. Repeated
connection-level log lines (uvicorn's, asyncio's "out of system resource" on accept) pass
:class:`RepeatFilter`: each distinct message at most once per interval, with a count.
"""

from __future__ import annotations

import asyncio
import logging
import threading
import time
from dataclasses import dataclass
from typing import Any, ClassVar

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

try:  # the C parser of the server extra; h11 (pure Python) when it is absent
    from uvicorn.protocols.http.httptools_impl import HttpToolsProtocol
except ImportError:  # pragma: no cover - the server extra installs httptools
    HttpToolsProtocol = None  # type: ignore[assignment,misc]

from memstrata.config import Settings
from memstrata.errors import MissingDependency
from memstrata.logs import valid_request_id
from memstrata.server.problems import problem
from memstrata.server.requests import HEADER

__all__ = [
    "GuardedH11Protocol",
    "GuardedHttpToolsProtocol",
    "RepeatFilter",
    "ServeLimits",
    "guarded_protocol",
    "install_log_limits",
]

# Connection-level events: a flood makes many, so this logger is rate-limited too.
conn_log = logging.getLogger("memstrata.server.connections")


@dataclass(frozen=True)
class ServeLimits:
    http: str = "auto"
    header_timeout_s: float = 10.0
    body_timeout_s: float = 30.0
    max_connections: int = 1000
    max_connections_per_address: int = 100
    log_interval_s: float = 10.0

    @classmethod
    def from_settings(cls, settings: Settings) -> ServeLimits:
        return cls(
            http=settings.serve_http,
            header_timeout_s=settings.serve_header_timeout_s,
            body_timeout_s=settings.serve_body_timeout_s,
            max_connections=settings.serve_max_connections,
            max_connections_per_address=settings.serve_max_connections_per_address,
            log_interval_s=settings.serve_log_interval_s,
        )


def _problem(status: int, code: str, detail: str) -> tuple[list[tuple[bytes, bytes]], bytes]:
    """A problem answer sent below the application: it closes the connection and carries a
    fresh request id (the application's middleware, which would add one, never runs)."""
    response = problem(status, code, detail, headers={"Connection": "close"})
    headers = [*response.raw_headers, (HEADER.lower().encode(), valid_request_id(None).encode())]
    return headers, bytes(response.body)


async def _over_capacity(scope: Any, receive: Any, send: Any) -> None:
    """The application of a connection over the cap: 503, and the connection closes."""
    headers, body = _problem(
        503, "over_capacity", "the server has too many open connections; try again shortly"
    )
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body})


async def _too_many_from_address(scope: Any, receive: Any, send: Any) -> None:
    """The application of a connection over its address's cap: 429, and it closes."""
    headers, body = _problem(
        429, "rate_limited", "too many open connections from this address; try again shortly"
    )
    headers.append((b"retry-after", b"1"))
    await send({"type": "http.response.start", "status": 429, "headers": headers})
    await send({"type": "http.response.body", "body": body})


# A connection over its address's cap gets this long to send its request's headers.
_OVER_ADDRESS_HEADER_S = 1.0


class _Guard:
    """The deadlines and the connection cap, over either of uvicorn's HTTP protocols: a
    protocol says which phase its client is in (:meth:`_client_phase`) and how it answers
    malformed HTTP; everything else is here."""

    _limits: ClassVar[ServeLimits | None] = None
    # Open connections per client address (one event loop per process: no lock needed).
    _by_address: ClassVar[dict[str, int]] = {}
    # Provided by uvicorn's protocol classes this is mixed into.
    transport: asyncio.Transport
    loop: asyncio.AbstractEventLoop
    connections: set[Any]
    app: Any

    @classmethod
    def use(cls, limits: ServeLimits) -> None:
        _Guard._limits = limits
        install_log_limits(limits.log_interval_s)

    @classmethod
    def limits(cls) -> ServeLimits:
        # A process started by ``--processes N`` reads its settings from the environment.
        if _Guard._limits is None:
            cls.use(ServeLimits.from_settings(Settings()))
        assert _Guard._limits is not None
        return _Guard._limits

    def _guard_init(self) -> None:
        self._deadline: asyncio.TimerHandle | None = None
        self._phase: str | None = None
        self._address: str | None = None  # counted in _by_address until the connection ends
        self._over_address = False

    def _client_phase(self) -> str | None:
        """What the client owes now: ``"headers"``, ``"body"`` or nothing (``None``)."""
        raise NotImplementedError

    def _guard_connection(self) -> None:
        cap = self.limits().max_connections
        if len(self.connections) > 2 * cap:
            conn_log.warning("closed a connection at once: over twice the connection cap")
            self.transport.close()
            return
        if self._count_address(self.limits().max_connections_per_address):
            return
        if len(self.connections) > cap:
            conn_log.warning("answered 503: over the connection cap")
            self.app = _over_capacity
        self._watch()

    def _count_address(self, per_address: int) -> bool:
        """Count this connection against its client's address; True when it was closed."""
        peer = self.transport.get_extra_info("peername")
        if per_address <= 0 or not isinstance(peer, tuple) or not peer:
            return False  # no cap, or not an IP connection (a Unix socket)
        address = str(peer[0])
        n = _Guard._by_address.get(address, 0) + 1
        _Guard._by_address[address] = n
        self._address = address
        if n > 2 * per_address:
            conn_log.warning("closed a connection at once: over twice the per-address cap")
            self.transport.close()
            return True
        if n > per_address:
            conn_log.warning("answered 429: over the per-address connection cap")
            self.app = _too_many_from_address
            self._over_address = True
        return False

    def _release(self) -> None:
        """The connection ended: stop its deadline, and uncount it from its address."""
        self._cancel()
        if self._address is not None:
            n = _Guard._by_address.get(self._address, 1) - 1
            if n > 0:
                _Guard._by_address[self._address] = n
            else:
                _Guard._by_address.pop(self._address, None)
            self._address = None

    def _watch(self) -> None:
        """Arm the deadline of what the client owes now: headers, a body, or nothing."""
        if self.transport.is_closing():
            self._cancel()
            return
        phase = self._client_phase()
        if phase == self._phase:
            return  # the deadline of this phase is already running: a trickle never extends it
        self._cancel()
        self._phase = phase
        if phase is not None:
            limits = self.limits()
            seconds = limits.header_timeout_s if phase == "headers" else limits.body_timeout_s
            if self._over_address:
                seconds = min(seconds, _OVER_ADDRESS_HEADER_S)
            self._deadline = self.loop.call_later(seconds, self._expired, phase)

    def _cancel(self) -> None:
        if self._deadline is not None:
            self._deadline.cancel()
            self._deadline = None
        self._phase = None

    def _expired(self, phase: str) -> None:
        self._deadline = None
        if not self.transport.is_closing():
            conn_log.warning("closed a connection: its request %s did not arrive in time", phase)
            self.transport.close()


class GuardedH11Protocol(_Guard, H11Protocol):
    """uvicorn's h11 protocol with deadlines and a connection cap (see the module's docstring)."""

    def __init__(self, *args: Any, **kwargs: Any) -> None:
        super().__init__(*args, **kwargs)
        self._guard_init()

    def _client_phase(self) -> str | None:
        state = self.conn.their_state
        return "headers" if state is h11.IDLE else "body" if state is h11.SEND_BODY else None

    def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
        super().connection_made(transport)
        self._guard_connection()

    def data_received(self, data: bytes) -> None:
        super().data_received(data)
        self._watch()

    def on_response_complete(self) -> None:
        super().on_response_complete()
        self._watch()

    def connection_lost(self, exc: Exception | None) -> None:
        self._release()
        super().connection_lost(exc)

    def send_400_response(self, msg: str) -> None:
        headers, body = _bad_request()
        for event in (
            h11.Response(status_code=400, headers=headers, reason=b"Bad Request"),
            h11.Data(data=body),
            h11.EndOfMessage(),
        ):
            self.transport.write(self.conn.send(event))
        self.transport.close()


class _OneWrite:
    """A response's view of its connection: the status line and headers wait for the
    body's first bytes, at most until the event loop's next turn, so an answer leaves in
    one write (one system call, one TCP segment) instead of two. uvicorn's httptools
    response writes the head and the body separately; the client sees the same bytes."""

    __slots__ = ("_held", "_loop", "_started", "_transport")

    def __init__(self, transport: asyncio.Transport, loop: asyncio.AbstractEventLoop) -> None:
        self._transport = transport
        self._loop = loop
        self._started = False
        self._held = b""

    def write(self, data: bytes) -> None:
        if not self._started:  # the head (or a 100 Continue): held for the next write
            self._started = True
            self._held = data
            self._loop.call_soon(self._flush)
            return
        held = self._held
        if held:
            self._held = b""
            data = held + data
        self._transport.write(data)

    def _flush(self) -> None:
        held = self._held
        if held:
            self._held = b""
            if not self._transport.is_closing():
                self._transport.write(held)

    def is_closing(self) -> bool:
        return self._transport.is_closing()

    def close(self) -> None:
        self._flush()
        self._transport.close()


def _bad_request() -> tuple[list[tuple[bytes, bytes]], bytes]:
    return _problem(
        400,
        "bad_request",
        "the HTTP request is malformed (request line, headers or message framing)",
    )


if HttpToolsProtocol is not None:

    class GuardedHttpToolsProtocol(_Guard, HttpToolsProtocol):
        """uvicorn's httptools protocol with deadlines and a connection cap (see the module's
        docstring). httptools reports a request in callbacks: the phase follows them."""

        def __init__(self, *args: Any, **kwargs: Any) -> None:
            super().__init__(*args, **kwargs)
            self._guard_init()
            self._client: str | None = "headers"

        def _client_phase(self) -> str | None:
            return self._client

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._guard_connection()

        def data_received(self, data: bytes) -> None:
            super().data_received(data)
            self._watch()

        def on_headers_complete(self) -> None:
            before = self.cycle
            super().on_headers_complete()
            self._client = "body"  # until on_message_complete says the body is all here
            if self.cycle is not before:  # a new request (not an upgrade, handed on as it was)
                self.cycle.transport = _OneWrite(self.transport, self.loop)  # type: ignore[assignment]

        def on_message_complete(self) -> None:
            super().on_message_complete()
            self._client = None

        def on_response_complete(self) -> None:
            super().on_response_complete()
            self._client = "headers"  # the next request, on a kept-alive connection
            self._watch()

        def connection_lost(self, exc: Exception | None) -> None:
            self._release()
            super().connection_lost(exc)

        def send_400_response(self, msg: str) -> None:
            headers, body = _bad_request()
            head = [b"HTTP/1.1 400 Bad Request\r\n"]
            head += [name + b": " + value + b"\r\n" for name, value in headers]
            self.transport.write(b"".join(head) + b"\r\n" + body)
            self.transport.close()


def guarded_protocol(limits: ServeLimits) -> type[asyncio.Protocol]:
    """The protocol class ``memstrata serve`` gives uvicorn, guarding with ``limits``:
    the parser ``limits.http`` names (``auto``: httptools when installed)."""
    _Guard.use(limits)
    if limits.http == "h11":
        return GuardedH11Protocol
    if HttpToolsProtocol is not None:
        return GuardedHttpToolsProtocol
    if limits.http == "httptools":
        raise MissingDependency(
            "MEMSTRATA_SERVE_HTTP=httptools needs httptools: pip install 'memstrata[server]'"
        )
    return GuardedH11Protocol


class RepeatFilter(logging.Filter):
    """A log filter letting each distinct message through at most once per ``interval_s``;
    the line that passes says how many were held back since the last one."""

    def __init__(self, interval_s: float) -> None:
        super().__init__()
        self.interval_s = interval_s
        self._lock = threading.Lock()
        self._last: dict[str, float] = {}
        self._held: dict[str, int] = {}

    def filter(self, record: logging.LogRecord) -> bool:
        # The first line names the event (asyncio adds socket and traceback lines after it).
        key = f"{record.name}:{str(record.msg).partition(chr(10))[0]}:{record.args!r}"
        now = time.monotonic()
        with self._lock:
            if now - self._last.get(key, float("-inf")) < self.interval_s:
                self._held[key] = self._held.get(key, 0) + 1
                return False
            if len(self._last) > 1000:
                self._last.clear()
                self._held.clear()
            self._last[key] = now
            held = self._held.pop(key, 0)
        if held:
            record.msg = f"{record.msg} ({held} more like it held back in the last interval)"
        return True


def install_log_limits(interval_s: float) -> None:
    """Rate-limit the loggers of connection-level errors (idempotent)."""
    for name in ("asyncio", "uvicorn.error", conn_log.name):
        logger = logging.getLogger(name)
        if not any(isinstance(f, RepeatFilter) for f in logger.filters):
            logger.addFilter(RepeatFilter(interval_s))
