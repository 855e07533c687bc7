"""How long-term memory's rows are read and written: the owner filter, fact rows by
column name, provenance, the owner's update lock, history events and erasure.

Shared by the operations of :mod:`~memstrata.longterm.store`,
:mod:`~memstrata.longterm.forget` and :mod:`~memstrata.longterm.portable`.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import replace
from datetime import datetime

from memstrata.longterm.apply import content_key
from memstrata.longterm.model import Fact, FactOrigin, FactSource, FactStatus
from memstrata.runtime import Runtime
from memstrata.sealing import PREFIX, lookup_key, seal, unseal
from memstrata.storage import tenancy
from memstrata.storage.plan import Exec, Op, Query, Row
from memstrata.storage.records import from_micros
from memstrata.storage.sql import placeholders
from memstrata.types import Scope

__all__ = [
    "COLUMNS",
    "FACT_COLUMNS",
    "MAX_CONTENT",
    "MAX_SECTION",
    "MAX_SOURCES",
    "OWNER",
    "bump_owner",
    "erase",
    "event_reason",
    "event_row",
    "load_sources",
    "owner",
    "reason_text",
    "seal_reason",
    "seal_section",
    "seal_source_error",
    "section_row",
    "section_text",
    "seq_of",
    "to_fact",
    "with_sources",
]

# The columns of a fact, in the order to_fact reads them (seq last: it orders pages).
FACT_COLUMNS = (
    "id",
    "content",
    "category",
    "confidence",
    "status",
    "origin",
    "agent_id",
    "superseded_by",
    "source_error",
    "reason",
    "created_at",
    "updated_at",
    "valid_from",
    "valid_to",
    "recorded_at",
    "superseded_at",
    "seq",
)
COLUMNS = ", ".join(FACT_COLUMNS)
OWNER = "tenant_id = ? AND user_id = ? AND agent_id = ?"
MAX_CONTENT = 2000
MAX_SOURCES = 20
MAX_SECTION = 4000


def owner(scope: Scope) -> tuple[str, str, str]:
    """The parameters of :data:`OWNER`."""
    return (scope.tenant, scope.user, scope.agent_key)


def stored_key(scope: Scope, content: str) -> str:
    """A fact's ``content_key`` as stored: keyed for its owner under encryption at rest."""
    return lookup_key(scope.tenant, scope.user, content_key(content))


def seal_fact(scope: Scope, fact_id: str, content: str) -> str:
    """A fact's text as stored: sealed for its owner, bound to the fact's id (a version row
    keeps the id, so it opens too)."""
    return seal("facts.content", fact_id, scope.tenant, scope.user, content) or content


def fact_text(fact_id: str, content: str | None) -> str:
    """A fact's text from its stored value (empty once the owner's key was destroyed)."""
    return unseal("facts.content", fact_id, content) or ""


def event_text(fact_id: str, event: str, at: int, content: str | None) -> str:
    """The text of a stored fact event (empty once its owner's key was destroyed)."""
    return unseal("fact_events.content", f"{fact_id}/{event}/{at}", content) or ""


def seal_reason(scope: Scope, fact_id: str, reason: str | None, *, keep: str = "") -> str | None:
    """A fact's ``reason`` as stored: the model's words sealed for the owner, bound to the
    fact, after ``keep`` (a marker memstrata matches in SQL, such as a consolidation's,
    left in clear). A reason memstrata writes itself (a withdrawn branch) is not sealed:
    queries match it."""
    if reason is None:
        return None
    return keep + (seal("facts.reason", fact_id, scope.tenant, scope.user, reason) or reason)


def reason_text(fact_id: str, stored: str | None) -> str | None:
    """A fact's reason from its stored value: a marker as stored, the sealed words opened
    (left out once the owner's key was destroyed)."""
    if not stored:
        return stored
    at = stored.find(PREFIX)
    if at < 0:
        return stored
    return stored[:at] + (unseal("facts.reason", fact_id, stored[at:]) or "")


def seal_source_error(scope: Scope, fact_id: str, text: str | None) -> str | None:
    """A fact's ``source_error`` (the model's note on its source) as stored."""
    return seal("facts.source_error", fact_id, scope.tenant, scope.user, text)


def event_reason(fact_id: str, event: str, at: int, reason: str | None) -> str | None:
    """The reason of a stored fact event (None once its owner's key was destroyed)."""
    return unseal("fact_events.reason", f"{fact_id}/{event}/{at}", reason)


def section_row(scope: Scope, section: str) -> str:
    # A version row keeps the section's text as it was, copied by SQL, so the binding is
    # the section (and agent), not the version.
    return f"{scope.agent_key}/{section}"


def seal_section(scope: Scope, section: str, summary: str) -> str:
    """A profile section's text as stored: sealed for its owner, bound to the section."""
    return (
        seal(
            "profile_sections.summary",
            section_row(scope, section),
            scope.tenant,
            scope.user,
            summary,
        )
        or summary
    )


def section_text(scope: Scope, section: str, summary: str | None) -> str:
    """A profile section's text from its stored value (empty once the owner's key was
    destroyed, as an unwritten section)."""
    return unseal("profile_sections.summary", section_row(scope, section), summary) or ""


def to_fact(row: Row, sources: Sequence[FactSource] = ()) -> Fact:
    """A fact from a row of :data:`COLUMNS` (its text opened; empty once the owner's data
    key was destroyed)."""
    (
        fact_id,
        content,
        category,
        confidence,
        status,
        origin,
        agent_id,
        superseded_by,
        source_error,
        reason,
        created_at,
        updated_at,
        valid_from,
        valid_to,
        recorded_at,
        superseded_at,
        _seq,
    ) = row
    return Fact(
        id=fact_id,
        content=fact_text(fact_id, content),
        category=category,
        confidence=float(confidence),
        status=FactStatus(status),
        origin=FactOrigin(origin),
        agent=agent_id or None,
        superseded_by=superseded_by,
        source_error=unseal("facts.source_error", fact_id, source_error),
        reason=reason_text(fact_id, reason),
        sources=tuple(sources),
        created_at=from_micros(created_at),
        updated_at=from_micros(updated_at),
        valid_from=_time(valid_from),
        valid_to=_time(valid_to),
        recorded_at=_time(recorded_at),
        superseded_at=_time(superseded_at),
    )


def _time(value: int | None) -> datetime | None:
    return None if value is None else from_micros(value)


def seq_of(row: Row) -> int:
    """The storage order of a row of :data:`COLUMNS`."""
    return int(row[-1])


def load_sources(ids: Sequence[str]) -> Op[dict[str, list[FactSource]]]:
    """The provenance of each fact (conversation and message), by fact id."""
    out: dict[str, list[FactSource]] = {i: [] for i in ids}
    if not ids:
        return out
    rows = yield Query(
        f"SELECT fact_id, conversation_id, message_id FROM fact_sources WHERE fact_id IN ({placeholders(len(ids))}) "
        "ORDER BY fact_id, conversation_id, message_id",
        list(ids),
    )
    for fid, cid, mid in rows:
        out[fid].append(FactSource(cid, mid or None))
    return out


def with_sources(rows: Sequence[Row]) -> Op[list[Fact]]:
    """Facts from rows of :data:`COLUMNS`, with their provenance."""
    facts = [to_fact(r) for r in rows]
    src = yield from load_sources([f.id for f in facts])
    return [replace(f, sources=tuple(src[f.id])) for f in facts]


def bump_owner(rt: Runtime, scope: Scope) -> Op[None]:
    """First step of every update: serialises updates of one owner's memory. The user row
    is held first (the lock order of every write, see ``tenancy.ensure_user``), so a user
    delete, which takes it before this row, never deadlocks with an update."""
    now = rt.clock()
    yield from tenancy.ensure_user(scope.tenant, scope.user, now)
    yield Exec(
        "INSERT INTO memory_owners (tenant_id, user_id, agent_id, revision, updated_at) "
        "VALUES (?, ?, ?, 1, ?) ON CONFLICT (tenant_id, user_id, agent_id) DO UPDATE SET "
        "revision = memory_owners.revision + 1, updated_at = excluded.updated_at",
        (*owner(scope), now),
    )


def event_row(
    rt: Runtime,
    scope: Scope,
    fact_id: str,
    event: str,
    content: str,
    category: str,
    confidence: float,
    *,
    reason: str | None = None,
    related_id: str | None = None,
    conversation_id: str | None = None,
) -> Exec:
    at = rt.clock()
    row = f"{fact_id}/{event}/{at}"
    sealed = seal("fact_events.content", row, scope.tenant, scope.user, content)
    # An event's reason is never matched in SQL: sealed whole (the model's words, or ours).
    reason = seal("fact_events.reason", row, scope.tenant, scope.user, reason)
    return Exec(
        "INSERT INTO fact_events (fact_id, tenant_id, user_id, event, content, category, confidence, "
        "reason, related_id, conversation_id, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            fact_id,
            scope.tenant,
            scope.user,
            event,
            sealed,
            category,
            confidence,
            reason,
            related_id,
            conversation_id,
            at,
        ),
    )


def erase(ids: Sequence[str]) -> Op[None]:
    """Erase facts for good: rows, sources, history, and pointers to them."""
    if not ids:
        return
    marks = placeholders(len(ids))
    yield Exec(f"DELETE FROM fact_sources WHERE fact_id IN ({marks})", ids)
    yield Exec(
        f"DELETE FROM fact_events WHERE fact_id IN ({marks}) OR related_id IN ({marks})",
        [*ids, *ids],
    )
    yield Exec(f"UPDATE facts SET superseded_by = NULL WHERE superseded_by IN ({marks})", ids)
    yield Exec(f"DELETE FROM fact_versions WHERE id IN ({marks})", ids)
    yield Exec(f"DELETE FROM facts WHERE id IN ({marks})", ids)
