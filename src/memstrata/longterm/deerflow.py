"""Import and export of DeerFlow's ``memory.json`` document.

DeerFlow keeps one document per user: three ``user`` and three ``history`` summaries
and a flat list of facts. Exporting to that shape lets a DeerFlow deployment read
memstrata's memory; importing from it lets a user bring their memory along. Import
validates the document's shape strictly and names the first bad element
(``facts[3].content``), because a half-imported memory is worse than a refused file
the user can fix. A fact's confidence is the exception: DeerFlow itself has written
null confidences (its bugs #4074/#4076), so a null, missing, string or out-of-range
confidence gets :data:`DEFAULT_CONFIDENCE` (DeerFlow's own default) and a warning
naming the fact, and the rest imports. A fact's ``id`` and ``source`` are kept.
"""

from __future__ import annotations

import math
import re
from collections.abc import Sequence
from dataclasses import dataclass, field
from datetime import UTC, datetime
from typing import Any

from memstrata.errors import InvalidInput
from memstrata.longterm.model import (
    CATEGORIES,
    Fact,
    FactOrigin,
    FactStatus,
    ProfileSection,
)

__all__ = [
    "DEERFLOW_GROUPS",
    "DEFAULT_CONFIDENCE",
    "PLACEHOLDER_SOURCES",
    "DeerFlowImport",
    "ImportedFact",
    "from_deerflow",
    "read_deerflow",
    "to_deerflow",
]

#: What a fact with an unusable confidence is given (DeerFlow: a missing one is 0.5).
DEFAULT_CONFIDENCE = 0.5
#: Sources that name no conversation (what export writes for facts without one).
PLACEHOLDER_SOURCES = frozenset({"manual", "imported", "unknown"})
_FACT_ID = re.compile(r"^[A-Za-z0-9][A-Za-z0-9._:\-]{0,127}$")

#: DeerFlow's two summary groups and the profile sections in each.
DEERFLOW_GROUPS: dict[str, tuple[str, ...]] = {
    "user": ("workContext", "personalContext", "topOfMind"),
    "history": ("recentMonths", "earlierContext", "longTermBackground"),
}

_VERSION = "1.0"


def _iso(moment: datetime) -> str:
    """ISO 8601 in UTC with a ``Z``, as DeerFlow writes it (a naive time is taken as UTC)."""
    if moment.tzinfo is not None:
        moment = moment.astimezone(UTC).replace(tzinfo=None)
    return moment.isoformat() + "Z"


def _source(fact: Fact) -> str:
    if fact.sources:
        return fact.sources[0].conversation_id
    if fact.origin is FactOrigin.MANUAL:
        return "manual"
    if fact.origin is FactOrigin.IMPORTED:
        return "imported"
    return "unknown"


def _export_fact(fact: Fact) -> dict[str, Any]:
    entry: dict[str, Any] = {
        "id": fact.id,
        "content": fact.content,
        "category": fact.category,
        "confidence": fact.confidence,
        "createdAt": _iso(fact.created_at),
        "source": _source(fact),
    }
    if fact.source_error:
        entry["sourceError"] = fact.source_error
    return entry


def to_deerflow(
    profile: Sequence[ProfileSection], facts: Sequence[Fact], *, now: datetime
) -> dict[str, Any]:
    """A DeerFlow memory document of ``profile`` and the active ``facts``; ``now`` is
    written as ``lastUpdated`` (the caller passes the memory's last change)."""
    by_name = {section.name: section for section in profile}
    doc: dict[str, Any] = {"version": _VERSION, "lastUpdated": _iso(now)}
    for group, names in DEERFLOW_GROUPS.items():
        doc[group] = {}
        for name in names:
            section = by_name.get(name)
            stamp = section.updated_at if section is not None else None
            doc[group][name] = {
                "summary": section.summary if section is not None else "",
                "updatedAt": _iso(stamp) if stamp is not None else "",
            }
    doc["facts"] = [_export_fact(f) for f in facts if f.status is FactStatus.ACTIVE]
    return doc


@dataclass(frozen=True, slots=True)
class ImportedFact:
    """One fact read from a DeerFlow document, validated, not yet stored."""

    content: str
    category: str
    confidence: float
    created_at: datetime | None
    source_error: str | None
    source: str | None
    #: The document's fact id when it can be kept as ours (letters, digits, ``._:-``).
    id: str | None = field(default=None, compare=False)


@dataclass(frozen=True, slots=True)
class DeerFlowImport:
    """A read document: profile sections, facts, and a warning per fact taken leniently."""

    profile: dict[str, str]
    facts: list[ImportedFact]
    warnings: list[dict[str, str]]


def _profile(doc: dict[str, Any]) -> dict[str, str]:
    profile: dict[str, str] = {}
    for group, names in DEERFLOW_GROUPS.items():
        sections = doc.get(group)
        if sections is None:
            continue
        if not isinstance(sections, dict):
            raise InvalidInput(f"{group} must be an object", field=group)
        for name in names:
            entry = sections.get(name)
            if entry is None:
                continue
            where = f"{group}.{name}"
            if not isinstance(entry, dict):
                raise InvalidInput(f"{where} must be an object", field=where)
            summary = entry.get("summary")
            if summary is not None and not isinstance(summary, str):
                raise InvalidInput(f"{where}.summary must be a string", field=f"{where}.summary")
            if summary and summary.strip():
                profile[name] = summary.strip()
    return profile


def _confidence(value: object) -> tuple[float, str | None]:
    """The confidence, or the default and why it was not usable."""
    if isinstance(value, str):
        try:
            parsed: object = float(value.strip())
        except ValueError:
            return DEFAULT_CONFIDENCE, f"confidence {value!r} is not a number"
        if _usable(parsed):
            return float(parsed), f"confidence {value!r} was a string"  # type: ignore[arg-type]
        value = parsed
    if value is None:
        return DEFAULT_CONFIDENCE, "confidence is missing or null"
    if not _usable(value):
        return DEFAULT_CONFIDENCE, f"confidence {value!r} is not a number between 0 and 1"
    return float(value), None  # type: ignore[arg-type]


def _usable(value: object) -> bool:
    return (
        not isinstance(value, bool)
        and isinstance(value, int | float)
        and math.isfinite(value)
        and 0.0 <= value <= 1.0
    )


def _created_at(value: object, where: str) -> datetime | None:
    if value is None or value == "":
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{where} must be an ISO 8601 string", field=where)
    try:
        moment = datetime.fromisoformat(value.strip())
    except ValueError:
        raise InvalidInput(f"{where} is not an ISO 8601 time: {value!r}", field=where) from None
    return moment if moment.tzinfo is not None else moment.replace(tzinfo=UTC)


def _optional_str(value: object, where: str) -> str | None:
    if value is None:
        return None
    if not isinstance(value, str):
        raise InvalidInput(f"{where} must be a string", field=where)
    return value.strip() or None


def _import_fact(entry: object, where: str, warnings: list[dict[str, str]]) -> ImportedFact:
    if not isinstance(entry, dict):
        raise InvalidInput(f"{where} must be an object", field=where)
    content = entry.get("content")
    if not isinstance(content, str) or not content.strip():
        raise InvalidInput(f"{where}.content must be a non-empty string", field=f"{where}.content")
    category = entry.get("category")
    category = category.strip().lower() if isinstance(category, str) else ""
    confidence, problem = _confidence(entry.get("confidence"))
    fact_id = entry.get("id")
    if problem is not None:
        warnings.append(
            {
                "field": f"{where}.confidence",
                "fact_id": fact_id if isinstance(fact_id, str) else "",
                "warning": f"{problem}; imported with confidence {confidence}",
            }
        )
    return ImportedFact(
        content=" ".join(content.split()),
        # DeerFlow also has identity, constraint, decision and other: kept as context.
        category=category if category in CATEGORIES else "context",
        confidence=confidence,
        created_at=_created_at(entry.get("createdAt"), f"{where}.createdAt"),
        source_error=_optional_str(entry.get("sourceError"), f"{where}.sourceError"),
        source=_optional_str(entry.get("source"), f"{where}.source"),
        id=fact_id if isinstance(fact_id, str) and _FACT_ID.match(fact_id) else None,
    )


def from_deerflow(doc: object) -> tuple[dict[str, str], list[ImportedFact]]:
    """The profile sections and facts of a DeerFlow memory document (see
    :func:`read_deerflow`, which also returns the warnings)."""
    read = read_deerflow(doc)
    return read.profile, read.facts


def read_deerflow(doc: object) -> DeerFlowImport:
    """The profile sections, facts and warnings of a DeerFlow memory document.

    Raises :class:`InvalidInput` naming the first element that is wrong (an unusable
    confidence is not: it gets the default and a warning). Facts whose content is the
    same up to case and whitespace are imported once (the first wins).
    """
    if not isinstance(doc, dict):
        raise InvalidInput("a DeerFlow memory document must be a JSON object", field="document")
    profile = _profile(doc)
    entries = doc.get("facts")
    if entries is None:
        entries = []
    if not isinstance(entries, list):
        raise InvalidInput("facts must be a list", field="facts")
    facts: list[ImportedFact] = []
    warnings: list[dict[str, str]] = []
    seen: set[str] = set()
    for index, entry in enumerate(entries):
        fact = _import_fact(entry, f"facts[{index}]", warnings)
        key = fact.content.casefold()
        if key not in seen:
            seen.add(key)
            facts.append(fact)
    return DeerFlowImport(profile, facts, warnings)
