"""The circuit breaker of database connections (no I/O), with a clock the test moves."""

from __future__ import annotations

from memstrata.backends.breaker import Breaker


def test_closed_until_a_failure_then_one_probe_per_interval() -> None:
    now = [100.0]
    b = Breaker(retry_s=0.25, clock=lambda: now[0])
    assert (b.admit(), b.is_open) == ("closed", False)
    b.failed()
    assert [b.admit() for _ in range(3)] == ["open"] * 3  # fail fast, no probe yet
    now[0] += 0.25
    assert b.admit() == "probe"
    assert b.admit() == "open"  # one probe at a time
    b.failed()  # the probe failed: wait another interval
    assert b.admit() == "open"
    now[0] += 0.25
    assert b.admit() == "probe"
    assert b.succeeded() is True  # was open: the engine starts fresh pools
    assert (b.admit(), b.succeeded()) == ("closed", False)
