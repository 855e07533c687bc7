"""Long-term memory in and out of a document: the state an export reads, and an import
(duplicates skipped, the cap on active facts kept). The document formats live in
:mod:`~memstrata.longterm.deerflow`."""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from memstrata.longterm.apply import plan_update
from memstrata.longterm.model import Fact, FactOrigin, FactSource, ProfileSection, ProposedUpdate
from memstrata.longterm.rows import (
    COLUMNS,
    OWNER,
    bump_owner,
    owner,
    stored_key,
    with_sources,
)
from memstrata.longterm.store import (
    FactInput,
    active_facts,
    apply_plan,
    as_active,
    get_profile,
    insert_fact,
    set_profile,
)
from memstrata.runtime import Runtime
from memstrata.storage.plan import Op, Query
from memstrata.storage.records import from_micros
from memstrata.types import Scope

__all__ = ["ImportFact", "export_state", "import_memory", "last_change"]


def export_state(scope: Scope) -> Op[tuple[list[Fact], list[ProfileSection]]]:
    """Active facts with their provenance, and the profile (for an export)."""
    rows = yield Query(
        f"SELECT {COLUMNS} FROM facts WHERE {OWNER} AND status = 'active' ORDER BY seq",
        owner(scope),
    )
    facts = yield from with_sources(rows)
    profile = yield from get_profile(scope)
    return facts, profile


@dataclass(frozen=True, slots=True)
class ImportFact:
    """One fact to import: its validated data, and what the document said of it."""

    data: FactInput
    created_at: int | None = None
    fact_id: str | None = None  # kept when no stored fact has it
    source: str | None = None  # kept as its source conversation


def import_memory(
    rt: Runtime,
    scope: Scope,
    profile: dict[str, str],
    facts: Sequence[ImportFact],
    *,
    max_facts: int,
) -> Op[dict[str, int]]:
    """Add imported profile sections and facts in one transaction (duplicates of active
    facts are skipped), then hold the cap on active facts. A fact keeps the document's id
    unless a stored fact has it already (a copy of another user's export: a new id)."""
    yield from bump_owner(rt, scope)
    if profile:
        yield from set_profile(rt, scope, profile)
    added = duplicates = 0
    for fact in facts:
        rows = yield Query(
            f"SELECT 1 FROM facts WHERE {OWNER} AND content_key = ? AND status = 'active'",
            (*owner(scope), stored_key(scope, fact.data.content)),
        )
        if rows:
            duplicates += 1
            continue
        fid = fact.fact_id
        if fid is not None and (yield Query("SELECT 1 FROM facts WHERE id = ?", (fid,))):
            fid = None
        sources = [FactSource(fact.source, "")] if fact.source else []
        yield from insert_fact(
            rt,
            scope,
            fact.data,
            FactOrigin.IMPORTED,
            created_at=fact.created_at,
            fact_id=fid,
            sources=sources,
        )
        added += 1
    active = yield from active_facts(scope)
    plan = plan_update(as_active(active), ProposedUpdate(), scrub=str, max_facts=max_facts)
    yield from apply_plan(rt, scope, None, plan, ())
    return {
        "profile_sections": len(profile),
        "facts_added": added,
        "duplicates": duplicates,
        "evicted": len(plan.evicted),
    }


def last_change(scope: Scope) -> Op[datetime | None]:
    """When the owner's long-term memory last changed (any fact or profile section)."""
    rows = yield Query(f"SELECT max(updated_at) FROM memory_owners WHERE {OWNER}", owner(scope))
    times = [rows[0][0]] if rows and rows[0][0] is not None else []
    for table in ("facts", "profile_sections"):
        found = yield Query(f"SELECT max(updated_at) FROM {table} WHERE {OWNER}", owner(scope))
        if found and found[0][0] is not None:
            times.append(found[0][0])
    return from_micros(max(int(t) for t in times)) if times else None
