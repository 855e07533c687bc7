"""JSON log lines: the same object whichever encoder writes them."""

from __future__ import annotations

import asyncio
import io
import json
import logging
from datetime import UTC, datetime
from typing import Any

import pytest

from memstrata import logs
from memstrata.logs import JsonFormatter, bound_request_id, log_direct


class _Odd:
    def __str__(self) -> str:
        return "an odd value"


def _record(**extra: Any) -> logging.LogRecord:
    record = logging.LogRecord(
        "memstrata.access", logging.INFO, __file__, 1, "GET %s %d", ("/x", 200), None
    )
    record.__dict__.update(extra)
    return record


EXTRA = {"route": "/v1/é", "status": 200, "duration_ms": 0.25, "agent": None, "odd": _Odd()}


@pytest.mark.parametrize("native", [True, False], ids=["orjson", "json"])
def test_a_line_is_one_json_object_with_every_field(
    monkeypatch: pytest.MonkeyPatch, native: bool
) -> None:
    if native:
        assert logs._native_dumps is not None  # the server extra (a dev dependency) has orjson
    else:
        monkeypatch.setattr(logs, "_native_dumps", None)
    with bound_request_id("req-1"):
        line = JsonFormatter().format(_record(**EXTRA))
    assert "\n" not in line
    assert "é" in line  # text as it is, not escaped
    out = json.loads(line)
    assert list(out)[:5] == ["time", "level", "logger", "message", "request_id"]
    assert out["level"] == "info"
    assert out["logger"] == "memstrata.access"
    assert out["message"] == "GET /x 200"
    assert out["request_id"] == "req-1"
    assert {k: out[k] for k in EXTRA} == {**EXTRA, "odd": "an odd value"}


def test_what_orjson_refuses_is_written_by_the_standard_encoder() -> None:
    big = 2**70  # over 64 bits: orjson refuses it
    out = json.loads(JsonFormatter().format(_record(count=big)))
    assert out["count"] == big


@pytest.mark.parametrize(
    "created",
    [
        0.0,
        1_700_000_000.0,
        1_700_000_000.0005,  # half a millisecond
        1_700_000_000.9994999,
        1_700_000_000.9999996,  # rounds to the next whole second, as datetime rounds it
        1_700_000_001.0000004,
        4_102_444_799.999,
    ],
)
def test_the_time_is_the_iso_text_of_the_record(created: float) -> None:
    record = _record()
    record.created = created
    expected = datetime.fromtimestamp(created, UTC).isoformat(timespec="milliseconds")
    assert json.loads(JsonFormatter().format(record))["time"] == expected
    # The same second formatted once and reused: still right on the second call.
    assert json.loads(JsonFormatter().format(record))["time"] == expected


def _json_logger(
    name: str, stream: io.StringIO | None = None
) -> tuple[logging.Logger, io.StringIO]:
    stream = io.StringIO() if stream is None else stream
    handler = logging.StreamHandler(stream)
    handler.setFormatter(JsonFormatter())
    logger = logging.getLogger(name)
    logger.handlers[:] = [handler]
    logger.setLevel(logging.INFO)
    logger.propagate = False
    return logger, stream


ACCESS = {"request_id": "r-1", "method": "GET", "route": "/v1/x", "status": 200, "duration_ms": 0.5}


def test_a_direct_line_is_the_line_logging_writes() -> None:
    logger, stream = _json_logger("memstrata.test.direct")
    log_direct(logger, logging.INFO, "GET /v1/x 200", ACCESS)
    logger.info("%s", "GET /v1/x 200", extra=ACCESS)
    logger.debug("below the level")
    log_direct(logger, logging.DEBUG, "below the level", ACCESS)
    direct, logged = (json.loads(line) for line in stream.getvalue().splitlines())
    direct.pop("time")
    logged.pop("time")
    assert list(direct.items()) == list(logged.items())


def test_any_other_set_up_gets_the_record_the_usual_way() -> None:
    logger, stream = _json_logger("memstrata.test.other")
    seen: list[str] = []

    def keep(record: logging.LogRecord) -> bool:
        seen.append(record.getMessage())
        return True

    logger.addFilter(keep)  # a filter must see every record
    log_direct(logger, logging.INFO, "filtered", ACCESS)
    logger.removeFilter(keep)
    plain = io.StringIO()
    second = logging.StreamHandler(plain)
    second.setFormatter(logging.Formatter("%(levelname)s %(message)s %(route)s"))
    logger.addHandler(second)  # two handlers: both get it, each in its own format
    log_direct(logger, logging.INFO, "twice", ACCESS)
    assert seen == ["filtered"]
    assert [json.loads(line)["message"] for line in stream.getvalue().splitlines()] == [
        "filtered",
        "twice",
    ]
    assert plain.getvalue() == "INFO twice /v1/x\n"


def test_a_failed_write_is_reported_as_the_handler_reports_it(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    logger, stream = _json_logger("memstrata.test.broken")
    stream.close()
    reported: list[logging.LogRecord] = []
    monkeypatch.setattr(logger.handlers[0], "handleError", reported.append)
    log_direct(logger, logging.INFO, "lost", ACCESS)  # never raises into the caller
    assert [r.getMessage() for r in reported] == ["lost"]


class _CountingStream(io.StringIO):
    flushes = 0

    def flush(self) -> None:
        self.flushes += 1
        super().flush()


def test_on_an_event_loop_the_lines_of_one_turn_are_flushed_together() -> None:
    stream = _CountingStream()
    logger, _ = _json_logger("memstrata.test.turns", stream)
    flushes_after: list[int] = []

    async def turns() -> None:
        for _ in range(5):
            log_direct(logger, logging.INFO, "a line", ACCESS)
        flushes_after.append(stream.flushes)  # the same turn: not yet
        await asyncio.sleep(0)
        flushes_after.append(stream.flushes)  # the next turn: once for the five

    before = stream.flushes
    asyncio.run(turns())
    assert [n - before for n in flushes_after] == [0, 1]
    assert len(stream.getvalue().splitlines()) == 5
    log_direct(logger, logging.INFO, "off a loop", ACCESS)  # flushed at once
    assert stream.flushes == before + 2


def test_a_loop_that_ended_before_its_flush_does_not_hold_the_next_loops_lines() -> None:
    stream = _CountingStream()
    logger, _ = _json_logger("memstrata.test.ended", stream)
    first = asyncio.new_event_loop()

    def write_and_stop() -> None:
        log_direct(logger, logging.INFO, "a line", ACCESS)
        first.stop()  # the loop ends after this turn: its flush never runs

    first.call_soon(write_and_stop)
    first.run_forever()
    first.close()
    before = stream.flushes
    assert before == 0

    async def write_and_turn() -> None:
        log_direct(logger, logging.INFO, "a line", ACCESS)
        await asyncio.sleep(0)

    asyncio.run(write_and_turn())
    assert stream.flushes > before
