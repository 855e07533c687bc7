"""The wire models: each encodes a domain object as its ``to_dict()`` does, validates as its
published schema, and decodes back to an equal object; and the response encoder keeps the
standard library's meaning for values orjson refuses."""

from __future__ import annotations

import json
from dataclasses import dataclass, replace
from datetime import UTC, datetime
from typing import Annotated, Any

import pytest
from pydantic import Field

from memstrata.client import _decode as decode
from memstrata.client._values import HistoryMessage, RemoteHistory
from memstrata.context import CacheReport, Context, ContextReport, Summary, TierReport
from memstrata.context.kit import CompactionResult
from memstrata.conversation.history import History
from memstrata.jobs.ops import Job, JobStatus
from memstrata.longterm.consolidate import Consolidation, ConsolidationChange, ConsolidationRevert
from memstrata.longterm.health import (
    FactBrief,
    HealthCheck,
    HealthExample,
    MemoryHealth,
    MemorySizes,
)
from memstrata.longterm.model import (
    Fact,
    FactEvent,
    FactOrigin,
    FactSource,
    FactStatus,
    ProfileSection,
)
from memstrata.nodes.layout import Turn
from memstrata.recall.service import RecallHit
from memstrata.receipts import Receipt
from memstrata.server.responses import JSONResponse
from memstrata.state import Checkpoint, Iteration, PlanDoc, RunSnapshot, WorkingMemory
from memstrata.types import Conversation, FileRef, Message, Role, Scope, Status, ToolCall
from memstrata.wire import Attr, Derived, OmitNone, Wire
from memstrata.wire.auth import Identity, MeOut
from memstrata.wire.context import (
    CacheReportOut,
    CompactionOut,
    ContextOut,
    ContextReportOut,
    SummaryOut,
    TierReportOut,
)
from memstrata.wire.conversations import ConversationOut, HistoryOut, MessageOut
from memstrata.wire.jobs import JobOut
from memstrata.wire.longterm import FactEventOut, FactOut, ProfileSectionOut
from memstrata.wire.memory import ConsolidationOut, ConsolidationRevertOut, MemoryHealthOut
from memstrata.wire.nodes import TurnOut
from memstrata.wire.recall import HitOut
from memstrata.wire.receipts import ReceiptOut
from memstrata.wire.state import (
    CheckpointOut,
    IterationOut,
    PlanOut,
    SnapshotOut,
    WorkingMemoryOut,
)

T0 = datetime(2026, 1, 2, 3, 4, 5, 678901, tzinfo=UTC)
T1 = datetime(2026, 1, 2, 3, 4, 6, tzinfo=UTC)
FILE = FileRef(type="image", transfer_method="remote_url", url="https://example.test/a.png")
CALL = ToolCall.model_validate({"id": "c1", "function": {"name": "look", "arguments": "{}"}})


def _message(mid: str = "m1", **changes: Any) -> Message:
    fields: dict[str, Any] = {
        "id": mid,
        "conversation_id": "c1",
        "parent_id": None,
        "role": Role.ASSISTANT,
        "content": "héllo",
        "files": (FILE,),
        "tool_calls": (CALL,),
        "tool_call_id": None,
        "status": Status.COMPLETE,
        "metadata": {"k": [1, 2]},
        "occurred_at": T0,
        "created_at": T1,
        "seq": 7,
        "depth": 2,
        "token_count": 5,
        "branch_tokens": 12,
        "position": 7,  # as in a store of one conversation; see the test below
    }
    return Message(**{**fields, **changes})


def _job(**changes: Any) -> Job:
    fields: dict[str, Any] = {
        "id": "j1",
        "kind": "longterm.extract",
        "key": "k",
        "tenant": "t",
        "user": "u",
        "agent": None,
        "conversation_id": "c1",
        "payload": {"leaf_id": None},
        "flags": {"capture": True},
        "status": JobStatus.DEAD,
        "attempts": 3,
        "max_attempts": 3,
        "run_after": T0,
        "first_enqueued_at": T0,
        "enqueue_count": 2,
        "lease_token": None,
        "worker": None,
        "last_error": "boom",
        "created_at": T0,
        "updated_at": T1,
        "finished_at": None,
        "request_id": "r1",
    }
    return Job(**{**fields, **changes})


_REPORT = ContextReport(
    budget=100,
    encoding="o200k_base",
    leaf_id="m1",
    tiers={"recent": TierReport(10, 8, 2), "recall": TierReport(5, 0, 0, "below floor")},
    dropped=[{"id": "m0"}],
    total=8,
    summary_id="s1",
    hash="h",
)
_SUMMARY = Summary("s1", "c1", "m3", 3, 40, 2, "s0", "so far", "llm", T0)
_FACT = Fact(
    "f1",
    "likes tea",
    "preference",
    0.5,
    FactStatus.ACTIVE,
    FactOrigin.EXTRACTED,
    None,
    None,
    None,
    None,
    (FactSource("c1", "m1"), FactSource("c2", None)),
    T0,
    T1,
)
_TURN = Turn("u1", "m1", None, "hi", (FILE,), "hello", (), 1_700_000_000_000_000)
_WORKING = WorkingMemory(None, "json", {"a": 1}, {"type": "object"}, None, 3, T0)

# (wire model, domain object, what decode needs besides the answer; None: not decoded)
CASES: list[tuple[type[Wire], Any, dict[str, Any] | None]] = [
    (MeOut, Identity("t", None, None, True), {}),
    (MeOut, Identity("t", "u", None, False), {}),
    (MessageOut, _message(), {}),
    (MessageOut, _message(files=(), tool_calls=(), role=Role.USER, parent_id="m0"), {}),
    (
        ConversationOut,
        Conversation("c1", "t", "u", "a", "title", {"x": 1}, "m1", T0, T1, 4),
        {"tenant": "t", "user": "u"},
    ),
    (JobOut, _job(), {"tenant": "t", "lease_token": None, "worker": None}),
    (
        JobOut,
        _job(status=JobStatus.DONE, finished_at=T1, request_id=None),
        {"tenant": "t", "lease_token": None, "worker": None},
    ),
    (FactOut, _FACT, {}),
    (FactOut, replace(_FACT, valid_from=T0, valid_to=T1, recorded_at=T0, superseded_at=T1), {}),
    (FactEventOut, FactEvent("f1", "edited", "likes tea", "preference", 1.0, None, "f0", T0), {}),
    (ProfileSectionOut, ProfileSection("work", "an engineer", T0), {"name": "work"}),
    (ProfileSectionOut, ProfileSection("work", "", None), {"name": "work"}),
    (ProfileSectionOut, ProfileSection("work", "nurse", T1, T0, T1), {"name": "work"}),
    (TurnOut, _TURN, {}),
    (HitOut, RecallHit(_message(), "c1", 0.25, ("m1", "m2"), "m9"), {}),
    (HitOut, RecallHit(_message(), "c1", 1.0, ("m1",)), {}),
    (PlanOut, PlanDoc("c1", ["step"], 2, T0), {}),
    (IterationOut, Iteration(1, "c1", "build", 2, "failed", "oops", {"n": 1}, T0), {}),
    (CheckpointOut, Checkpoint("graph", "r1", None, {"s": 1}, None, T0, T1), {}),
    (CheckpointOut, Checkpoint("graph", "r1", "c1", [1], T1, T0, T1), {}),
    (SnapshotOut, RunSnapshot("c1", "r1", {"ui": True}, T0, T1), {}),
    (WorkingMemoryOut, _WORKING, {}),
    (WorkingMemoryOut, WorkingMemory("c1", "markdown", "# notes", None, None, 1, T0), {}),
    (TierReportOut, TierReport(1, 2, 3), {}),
    (TierReportOut, TierReport(1, 0, 0, "none"), {}),
    (CacheReportOut, CacheReport(120, 3), {}),
    (CacheReportOut, CacheReport(), {}),
    (ContextReportOut, _REPORT, {}),
    (ContextOut, Context([{"role": "user", "content": "hi"}], _REPORT, []), None),
    (SummaryOut, _SUMMARY, None),
    (CompactionOut, CompactionResult("compacted", None, _SUMMARY), None),
    (CompactionOut, CompactionResult("skipped", "nothing new", None), None),
    (
        HistoryOut,
        History("m1", [_message(), _message("m2", tool_call_id=None)], 9, True, False, "o200k"),
        None,
    ),
    (ReceiptOut, Receipt("r1", "t", "u", None, "fact", ["f1"], "python", T0, {"facts": 1}, {}), {}),
    (
        ReceiptOut,
        Receipt(
            "r2",
            "t",
            "u",
            "a",
            "user",
            ["u", "c1"],
            "key k1",
            T0,
            {"messages": 3, "users": 1},
            {"node_memory/t/app/c1/n/g/": 2},
            False,
            T1,
            ["jobs.payload: 1 rows contain a deleted id"],
        ),
        {},
    ),
]
# Memory health and consolidation.
_BRIEF = FactBrief("f1", "preference", "likes tea")
_CHECK = HealthCheck(
    1, (HealthExample((_BRIEF, FactBrief("f2", "preference", "likes tea!")), "n"),)
)
_HEALTH = MemoryHealth(
    T0,
    90,
    2,
    False,
    False,
    False,
    MemorySizes(2, 1, 0, 0, 1, 8, 3),
    _CHECK,
    HealthCheck(0, ()),
    HealthCheck(0, ()),
    HealthCheck(None, (), known=False),
)
_CHANGE = ConsolidationChange("merge", (_BRIEF,), None, "likes green tea", "preference", True, "r")
CASES += [
    (MemoryHealthOut, _HEALTH, {}),
    (ConsolidationOut, Consolidation("k1", "llm", True, False, (_CHANGE,), ("a note",)), {}),
    (ConsolidationRevertOut, ConsolidationRevert("k1", ("f1",), ()), {}),
]
IDS = [f"{model.__name__}-{i}" for i, (model, _, _) in enumerate(CASES)]


@pytest.mark.parametrize(("model", "obj", "extra"), CASES, ids=IDS)
def test_encode_is_to_dict(model: type[Wire], obj: Any, extra: dict[str, Any] | None) -> None:
    # The domain types' to_dict() and the wire model cannot drift apart.
    if not hasattr(obj, "to_dict"):
        assert model.encode(obj) == {k: getattr(obj, k) for k in model.model_fields}
        return
    assert model.encode(obj) == obj.to_dict()
    assert list(model.encode(obj)) == list(obj.to_dict())  # the same key order too


@pytest.mark.parametrize(("model", "obj", "extra"), CASES, ids=IDS)
def test_encoded_validates_as_the_published_schema(
    model: type[Wire], obj: Any, extra: dict[str, Any] | None
) -> None:
    encoded = model.encode(obj)
    json.dumps(encoded, allow_nan=False)  # JSON-ready: no datetime, enum or tuple left
    model.model_validate(encoded)


# Contexts, compactions and histories come back as the remote client's own types (below).
DECODED = [(model, obj, extra) for model, obj, extra in CASES if extra is not None]


@pytest.mark.parametrize(("model", "obj", "extra"), DECODED)
def test_decode_rebuilds_the_object(model: type[Wire], obj: Any, extra: dict[str, Any]) -> None:
    wire = json.loads(json.dumps(model.encode(obj)))
    assert model.decode(wire, **extra) == obj


def test_history_decodes_into_the_remote_result() -> None:
    h = History("m2", [_message(), _message("m2")], 9, False, True, "o200k")
    got = decode.history(json.loads(json.dumps(HistoryOut.encode(h))))
    assert isinstance(got, RemoteHistory)
    assert (got.leaf_id, got.tokens, got.over_budget) == ("m2", 9, True)
    assert all(isinstance(m, HistoryMessage) for m in got.messages)
    assert got.to_dict() == h.to_dict()
    assert got.to_openai() == h.to_openai()


def test_client_decoders_fill_what_the_answer_leaves_out() -> None:
    conv = Conversation("c1", "t", "u", None, None, {}, None, T0, T1, 0)
    assert decode.conversation(Scope("t", "u"))(conv.to_dict()) == conv
    job = _job()
    assert decode.job("t")(job.to_dict()) == job
    sections = decode.profile({"sections": {"a": {"summary": "x", "updated_at": None}}})
    assert sections == [ProfileSection("a", "x", None)]
    assert decode.user({"id": "u", "created_at": T0.isoformat()}) == ("u", T0)


def test_a_message_shows_its_place_in_its_conversation_not_the_stores_counter() -> None:
    message = _message(seq=90, position=3)
    assert MessageOut.encode(message)["seq"] == 3
    assert message.to_dict()["seq"] == 3
    back = decode.message(MessageOut.encode(message))
    assert (back.seq, back.position) == (3, 3)  # the remote client knows the position only


def test_an_answer_of_another_shape_is_a_memstrata_error() -> None:
    from memstrata.errors import MemstrataError

    wire = MessageOut.encode(_message())
    del wire["seq"]
    with pytest.raises(MemstrataError, match="unexpected shape"):
        decode.parse(decode.message, wire)


@dataclass(frozen=True, slots=True)
class _Thing:
    up: str
    when: datetime | None
    note: str | None = None


class _ThingOut(Wire):
    __domain__ = _Thing

    name: Annotated[str, Attr("up")]
    when: datetime | None
    loud: Annotated[str, Derived(lambda o: o.up.upper())]
    note: Annotated[str | None, OmitNone] = None
    count: int = Field(default=0)  # not the domain's: left to the surface that owns it


def test_codec_markers() -> None:
    assert _ThingOut.encode(_Thing("x", None, None)) == {"name": "x", "when": None, "loud": "X"}
    assert _ThingOut.encode(_Thing("x", T0, "n")) == {
        "name": "x",
        "when": T0.isoformat(),
        "loud": "X",
        "note": "n",
    }
    wire = {"name": "x", "when": T0.isoformat(), "loud": "X"}
    assert _ThingOut.decode(wire) == _Thing("x", T0)  # derived and foreign fields not rebuilt
    # Into a type that takes every field: a left-out key decodes as its default.
    assert _ThingOut.decoder(dict)(wire) == {"up": "x", "when": T0, "note": None, "count": 0}
    assert _ThingOut.decoder(dict) is _ThingOut.decoder(dict)  # compiled once


def _body(content: Any) -> bytes:
    return bytes(JSONResponse(content).body)


def test_response_encoding_keeps_the_standard_meaning() -> None:
    value = {"a": "é ☃", "b": [1, 2.5, None, True], "c": {"d": "x/y\n\u2028"}, "e": 10**15}
    assert json.loads(_body(value)) == value
    assert _body({"a": "é"}) == '{"a":"é"}'.encode()  # compact, UTF-8, not \u-escaped


def test_response_encoding_never_fails_on_a_stored_value() -> None:
    assert json.loads(_body({"x": float("nan"), "y": [float("inf")]})) == {"x": None, "y": [None]}
    # A lone surrogate (written by an older version) is escaped, not a 500.
    assert json.loads(_body({"s": "a\ud800b"})) == {"s": "a\ud800b"}
    assert json.loads(_body({"n": 2**70, 1: "int key"})) == {"n": 2**70, "1": "int key"}
