"""JSON log lines: the same object whichever encoder writes them."""

from __future__ import annotations

import json
import logging
from datetime import UTC, datetime
from typing import Any

import pytest

from memstrata import logs
from memstrata.logs import JsonFormatter, bound_request_id


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
