"""Which HTTP parser `memstrata serve` runs: httptools by default, h11 on request."""

from __future__ import annotations

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
