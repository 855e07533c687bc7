"""DeerFlow memory.json export and import: the document shape, strict validation with
field paths, category mapping, de-duplication, and a JSON round trip."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta, timezone
from typing import Any

import pytest

from memstrata.errors import InvalidInput
from memstrata.longterm.deerflow import ImportedFact, from_deerflow, to_deerflow
from memstrata.longterm.model import Fact, FactOrigin, FactSource, FactStatus, ProfileSection

_T0 = datetime(2026, 2, 3, 4, 5, 6, 789000, tzinfo=UTC)


def fact(
    id: str,
    content: str,
    *,
    category: str = "preference",
    confidence: float = 0.9,
    status: FactStatus = FactStatus.ACTIVE,
    origin: FactOrigin = FactOrigin.EXTRACTED,
    sources: tuple[FactSource, ...] = (),
    source_error: str | None = None,
    created_at: datetime = _T0,
) -> Fact:
    return Fact(
        id=id,
        content=content,
        category=category,
        confidence=confidence,
        status=status,
        origin=origin,
        agent=None,
        superseded_by=None,
        source_error=source_error,
        reason=None,
        sources=sources,
        created_at=created_at,
        updated_at=created_at,
    )


PROFILE = [
    ProfileSection("workContext", "Data engineer at a bank.", _T0),
    ProfileSection("recentMonths", "Moved to Oslo.", None),
]
FACTS = [
    fact("f1", "Prefers Python", sources=(FactSource("conv-1", "m1"), FactSource("conv-2", None))),
    fact("f2", "Name is Ana", category="knowledge", confidence=1.0, origin=FactOrigin.MANUAL),
    fact(
        "f3",
        "Use UTC in examples",
        category="correction",
        confidence=0.95,
        origin=FactOrigin.IMPORTED,
        source_error="used local time",
        created_at=datetime(2026, 1, 1, 12, 0, tzinfo=timezone(timedelta(hours=2))),
    ),
    fact("f4", "Old fact", status=FactStatus.SUPERSEDED),
    fact("f5", "Extracted, no source"),
]


# -- export --------------------------------------------------------------------------------


def test_export_shape():
    doc = to_deerflow(PROFILE, FACTS, now=_T0)
    assert doc["version"] == "1.0"
    assert doc["lastUpdated"] == "2026-02-03T04:05:06.789000Z"
    assert doc["user"] == {
        "workContext": {
            "summary": "Data engineer at a bank.",
            "updatedAt": "2026-02-03T04:05:06.789000Z",
        },
        "personalContext": {"summary": "", "updatedAt": ""},
        "topOfMind": {"summary": "", "updatedAt": ""},
    }
    assert doc["history"]["recentMonths"] == {"summary": "Moved to Oslo.", "updatedAt": ""}
    assert set(doc["history"]) == {"recentMonths", "earlierContext", "longTermBackground"}
    assert doc["facts"] == [
        {
            "id": "f1",
            "content": "Prefers Python",
            "category": "preference",
            "confidence": 0.9,
            "createdAt": "2026-02-03T04:05:06.789000Z",
            "source": "conv-1",
        },
        {
            "id": "f2",
            "content": "Name is Ana",
            "category": "knowledge",
            "confidence": 1.0,
            "createdAt": "2026-02-03T04:05:06.789000Z",
            "source": "manual",
        },
        {
            "id": "f3",
            "content": "Use UTC in examples",
            "category": "correction",
            "confidence": 0.95,
            "createdAt": "2026-01-01T10:00:00Z",
            "source": "imported",
            "sourceError": "used local time",
        },
        {
            "id": "f5",
            "content": "Extracted, no source",
            "category": "preference",
            "confidence": 0.9,
            "createdAt": "2026-02-03T04:05:06.789000Z",
            "source": "unknown",
        },
    ]
    json.dumps(doc)  # JSON-ready


def test_export_of_nothing():
    doc = to_deerflow([], [], now=datetime(2026, 1, 1))
    assert doc["lastUpdated"] == "2026-01-01T00:00:00Z"
    assert doc["facts"] == []
    assert all(v == {"summary": "", "updatedAt": ""} for v in doc["user"].values())


def test_round_trip_through_json():
    doc = json.loads(json.dumps(to_deerflow(PROFILE, FACTS, now=_T0)))
    profile, facts = from_deerflow(doc)
    assert profile == {"workContext": "Data engineer at a bank.", "recentMonths": "Moved to Oslo."}
    active = [f for f in FACTS if f.status is FactStatus.ACTIVE]
    assert facts == [
        ImportedFact(
            content=f.content,
            category=f.category,
            confidence=f.confidence,
            created_at=f.created_at,
            source_error=f.source_error,
            source=doc["facts"][i]["source"],
        )
        for i, f in enumerate(active)
    ]
    assert all(f.created_at is not None and f.created_at.tzinfo is not None for f in facts)


# -- import --------------------------------------------------------------------------------


def test_import_maps_categories_and_skips_empty_summaries():
    doc = {
        "user": {
            "workContext": {"summary": "  Engineer  ", "updatedAt": ""},
            "topOfMind": {"summary": "", "updatedAt": ""},
        },
        "history": {"longTermBackground": {"summary": "   "}},
        "facts": [
            {"content": "Is a nurse", "category": "identity", "confidence": 0.9},
            {"content": "No meetings on Fridays", "category": "Constraint", "confidence": 1},
            {"content": "Picked Postgres", "category": "decision", "confidence": 0.8},
            {"content": "Misc", "category": "other", "confidence": 0.5},
            {"content": "Knows Rust", "category": "knowledge", "confidence": 0.7},
            {"content": "Nothing given", "confidence": 0},
        ],
    }
    profile, facts = from_deerflow(doc)
    assert profile == {"workContext": "Engineer"}
    assert [f.category for f in facts] == [
        "context",
        "context",
        "context",
        "context",
        "knowledge",
        "context",
    ]
    assert facts[1].confidence == 1.0
    assert isinstance(facts[1].confidence, float)
    assert facts[0].created_at is None
    assert facts[0].source is None


def test_import_deduplicates_by_folded_content():
    doc = {
        "facts": [
            {"content": "Likes  Tea", "confidence": 0.6, "source": "t1"},
            {"content": "likes tea", "confidence": 0.9},
            {"content": "LIKES\ttea ", "confidence": 0.9},
            {"content": "Likes coffee", "confidence": 0.9},
        ]
    }
    _, facts = from_deerflow(doc)
    assert [(f.content, f.confidence, f.source) for f in facts] == [
        ("Likes Tea", 0.6, "t1"),
        ("Likes coffee", 0.9, None),
    ]


def test_import_accepts_naive_and_offset_times():
    doc = {
        "facts": [
            {"content": "a", "confidence": 0.5, "createdAt": "2025-05-06T07:08:09"},
            {"content": "b", "confidence": 0.5, "createdAt": "2025-05-06T07:08:09+02:00"},
            {"content": "c", "confidence": 0.5, "createdAt": "2025-05-06T07:08:09.5Z"},
            {"content": "d", "confidence": 0.5, "createdAt": ""},
            {"content": "e", "confidence": 0.5, "createdAt": None},
        ]
    }
    _, facts = from_deerflow(doc)
    assert facts[0].created_at == datetime(2025, 5, 6, 7, 8, 9, tzinfo=UTC)
    assert facts[1].created_at == datetime(2025, 5, 6, 5, 8, 9, tzinfo=UTC)
    assert facts[2].created_at == datetime(2025, 5, 6, 7, 8, 9, 500000, tzinfo=UTC)
    assert facts[3].created_at is None
    assert facts[4].created_at is None


def test_import_of_an_empty_document():
    assert from_deerflow({}) == ({}, [])
    assert from_deerflow({"facts": None, "user": None}) == ({}, [])


@pytest.mark.parametrize(
    ("doc", "field"),
    [
        ([], "document"),
        ("memory", "document"),
        (None, "document"),
        ({"facts": {}}, "facts"),
        ({"facts": [{"content": "a", "confidence": 0.5}, "b"]}, "facts[1]"),
        ({"facts": [{"confidence": 0.5}]}, "facts[0].content"),
        ({"facts": [{"content": "  ", "confidence": 0.5}]}, "facts[0].content"),
        ({"facts": [{"content": 3, "confidence": 0.5}]}, "facts[0].content"),
        (
            {"facts": [{"content": "a", "confidence": 0.5, "createdAt": "yesterday"}]},
            "facts[0].createdAt",
        ),
        ({"facts": [{"content": "a", "confidence": 0.5, "createdAt": 5}]}, "facts[0].createdAt"),
        (
            {"facts": [{"content": "a", "confidence": 0.5, "sourceError": ["x"]}]},
            "facts[0].sourceError",
        ),
        ({"facts": [{"content": "a", "confidence": 0.5, "source": 1}]}, "facts[0].source"),
        ({"user": []}, "user"),
        ({"history": {"recentMonths": "text"}}, "history.recentMonths"),
        ({"user": {"workContext": {"summary": 1}}}, "user.workContext.summary"),
    ],
)
def test_import_names_the_first_bad_element(doc: Any, field: str):
    with pytest.raises(InvalidInput) as info:
        from_deerflow(doc)
    assert info.value.detail["field"] == field


def test_import_stops_at_the_first_bad_fact():
    doc = {
        "facts": [
            {"content": "a", "confidence": 0.5},
            {"content": "", "confidence": 0.5},
            {"content": "c", "confidence": 9},
        ]
    }
    with pytest.raises(InvalidInput) as info:
        from_deerflow(doc)
    assert info.value.detail["field"] == "facts[1].content"
