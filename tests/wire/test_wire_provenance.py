"""The provenance wire models: encode is to_dict(), the result validates as the published
schema, and decode rebuilds the object."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

import pytest

from memstrata.client._values import RemoteContext
from memstrata.context import ContextReport
from memstrata.provenance import ContextRecord, FactUse, Provenance, RecordItem
from memstrata.wire import Wire
from memstrata.wire.context import ContextOut
from memstrata.wire.provenance import ContextRecordOut, FactUseOut, ProvenanceOut, RecordItemOut

T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
T1 = datetime(2026, 1, 2, 3, 4, 6, tzinfo=UTC)
ITEM = RecordItem("facts", "fact", "f1", None, 1767323045678901, "deleted")
MSG = RecordItem("recall", "message", "m1", "c2", None, "present")
RECORD = ContextRecord(
    "r1", "c1", "m9", 8000, {"total": 12, "tiers": {}}, "m10", T0, T1, (ITEM, MSG)
)
CASES: list[tuple[type[Wire], Any]] = [
    (RecordItemOut, ITEM),
    (RecordItemOut, MSG),
    (ContextRecordOut, RECORD),
    (ContextRecordOut, ContextRecord("r2", "c1", None, 10, {}, None, T0, None, ())),
    (ProvenanceOut, Provenance("c1", "m10", RECORD)),
    (ProvenanceOut, Provenance("c1", "m3", None)),
    (FactUseOut, FactUse("c1", "m10", "r1", T0, 17)),
]


@pytest.mark.parametrize(("model", "obj"), CASES)
def test_encode_validate_decode(model: type[Wire], obj: Any) -> None:
    encoded = model.encode(obj)
    assert encoded == obj.to_dict()
    assert list(encoded) == list(obj.to_dict())
    json.dumps(encoded, allow_nan=False)
    model.model_validate(encoded)
    assert model.decode(json.loads(json.dumps(encoded))) == obj


def test_a_recorded_context_carries_its_id_and_an_unrecorded_one_leaves_it_out() -> None:
    report = ContextReport(100, "o200k_base", None, {})
    recorded = RemoteContext([], report, "r1")
    assert ContextOut.encode(recorded)["context_id"] == "r1"
    assert "context_id" not in ContextOut.encode(RemoteContext([], report))
    decoded = ContextOut.decoder(RemoteContext)(json.loads(json.dumps(ContextOut.encode(recorded))))
    assert decoded.context_id == "r1"
