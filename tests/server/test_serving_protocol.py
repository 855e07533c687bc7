"""Which HTTP parser `memstrata serve` runs: httptools by default, h11 on request."""

from __future__ import annotations

import asyncio

import pytest

from memstrata.config import Settings
from memstrata.server.serving import (
    GuardedH11Protocol,
    GuardedHttpToolsProtocol,
    ServeLimits,
    guarded_protocol,
)


def test_auto_serves_with_httptools_the_server_extra_installs() -> None:
    assert guarded_protocol(ServeLimits.from_settings(Settings())) is GuardedHttpToolsProtocol


@pytest.mark.parametrize(
    ("choice", "expected"),
    [("httptools", GuardedHttpToolsProtocol), ("h11", GuardedH11Protocol)],
)
def test_the_parser_is_a_setting(choice: str, expected: type) -> None:
    limits = ServeLimits.from_settings(Settings(serve_http=choice))
    assert guarded_protocol(limits) is expected
    assert GuardedHttpToolsProtocol.limits() is limits  # one set of limits, whichever parser


class _Transport:
    def __init__(self) -> None:
        self.writes: list[bytes] = []
        self.closed = False

    def write(self, data: bytes) -> None:
        self.writes.append(data)

    def is_closing(self) -> bool:
        return self.closed

    def close(self) -> None:
        self.closed = True


def test_a_response_leaves_in_one_write() -> None:
    from memstrata.server.serving import _OneWrite

    async def scenario() -> list[list[bytes]]:
        seen = []
        # The head waits for the body's first bytes; the rest goes as written.
        t = _Transport()
        w = _OneWrite(t, asyncio.get_running_loop())  # type: ignore[arg-type]
        w.write(b"HEAD")
        assert t.writes == []
        w.write(b"BODY")
        w.write(b"MORE")
        await asyncio.sleep(0)
        seen.append(t.writes)
        # A head whose body comes later (a stream) leaves on the loop's next turn.
        t = _Transport()
        w = _OneWrite(t, asyncio.get_running_loop())  # type: ignore[arg-type]
        w.write(b"HEAD")
        await asyncio.sleep(0)
        seen.append(list(t.writes))
        w.write(b"LATER")
        seen.append(t.writes)
        # Closing sends what is held first; nothing is written to a closed connection.
        t = _Transport()
        w = _OneWrite(t, asyncio.get_running_loop())  # type: ignore[arg-type]
        w.write(b"HEAD")
        w.close()
        assert t.closed
        assert w.is_closing()
        seen.append(t.writes)
        t = _Transport()
        w = _OneWrite(t, asyncio.get_running_loop())  # type: ignore[arg-type]
        w.write(b"HEAD")
        t.closed = True
        await asyncio.sleep(0)
        seen.append(t.writes)
        return seen

    assert asyncio.run(scenario()) == [
        [b"HEADBODY", b"MORE"],
        [b"HEAD"],
        [b"HEAD", b"LATER"],
        [b"HEAD"],
        [],
    ]
