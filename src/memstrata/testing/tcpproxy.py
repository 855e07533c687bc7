"""A TCP proxy on 127.0.0.1 that can cut the line, to test outages without stopping a
server: :meth:`CuttableProxy.cut` closes every open connection and refuses new ones
(they are accepted and closed at once, as a load balancer with no backend does);
:meth:`CuttableProxy.restore` forwards again. ``attempts`` counts the connections
clients opened, so a test can tell a failed-fast call from one that tried to connect.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from types import TracebackType

__all__ = ["CuttableProxy"]

_CHUNK = 65536


class CuttableProxy:
    """Forward ``127.0.0.1:<port>`` to ``(host, port)`` until cut."""

    def __init__(self, target_host: str, target_port: int) -> None:
        self._target = (target_host, target_port)
        self._listener = socket.create_server(("127.0.0.1", 0))
        self.port: int = self._listener.getsockname()[1]
        self._lock = threading.Lock()
        self._open: set[socket.socket] = set()
        self._cut = False
        self._closed = False
        self.attempts = 0
        self._thread = threading.Thread(target=self._accept, name="tcp-proxy", daemon=True)
        self._thread.start()

    def __enter__(self) -> CuttableProxy:
        return self

    def __exit__(
        self, kind: type[BaseException] | None, exc: BaseException | None, tb: TracebackType | None
    ) -> None:
        self.close()

    def cut(self) -> None:
        """Drop every connection now, and every new one until :meth:`restore`."""
        with self._lock:
            self._cut = True
            sockets, self._open = self._open, set()
        for s in sockets:
            _shut(s)

    def restore(self) -> None:
        with self._lock:
            self._cut = False

    def close(self) -> None:
        self._closed = True
        self.cut()
        self._listener.close()

    def _accept(self) -> None:
        while not self._closed:
            try:
                client, _ = self._listener.accept()
            except OSError:
                return
            with self._lock:
                self.attempts += 1
                cut = self._cut
            if cut:
                _shut(client)
                continue
            try:
                upstream = socket.create_connection(self._target, timeout=5)
            except OSError:
                _shut(client)
                continue
            upstream.settimeout(None)
            with self._lock:
                self._open.update((client, upstream))
            for a, b in ((client, upstream), (upstream, client)):
                threading.Thread(target=self._pipe, args=(a, b), daemon=True).start()

    def _pipe(self, src: socket.socket, dst: socket.socket) -> None:
        try:
            while data := src.recv(_CHUNK):
                dst.sendall(data)
        except OSError:
            pass
        finally:
            _shut(src)
            _shut(dst)
            with self._lock:
                self._open.discard(src)
                self._open.discard(dst)


def _shut(s: socket.socket) -> None:
    with contextlib.suppress(OSError):
        s.shutdown(socket.SHUT_RDWR)
    s.close()
