"""Facts, profiles and the extraction log in SQL (sans-IO operations, every backend).

Every statement filters by the owner ``(tenant, user, agent)``: a fact of another
user, or of another agent of the same user, is "not found", exactly like a
conversation of theirs.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memstrata.conversation.ops import page_limit
from memstrata.errors import Conflict, InvalidInput, NotFound
from memstrata.longterm.apply import ActiveFact, UpdatePlan, content_key, plan_update
from memstrata.longterm.model import (
    CATEGORIES,
    PROFILE_SECTIONS,
    Fact,
    FactEvent,
    FactOrigin,
    FactSource,
    FactStatus,
    ProfileSection,
    ProposedUpdate,
)
from memstrata.runtime import Runtime
from memstrata.storage import tenancy
from memstrata.storage.plan import Exec, Op, Query, Row
from memstrata.storage.records import check_text, dump_json, from_micros
from memstrata.storage.sql import encode_cursor, seq_cursor
from memstrata.types import Page, Scope

__all__ = [
    "ExtractionRecord",
    "FactInput",
    "ImportFact",
    "active_facts",
    "add_fact",
    "apply_plan",
    "check_fact_input",
    "delete_fact",
    "edit_fact",
    "fact_history",
    "forget_conversations",
    "forget_messages",
    "forget_user",
    "get_fact",
    "get_profile",
    "import_memory",
    "last_change",
    "list_facts",
    "list_updates",
    "mark_seen",
    "record_update",
    "seen_among",
    "set_profile",
]

_OWNER = "tenant_id = ? AND user_id = ? AND agent_id = ?"
_COLUMNS = (
    "id, content, category, confidence, status, origin, agent_id, superseded_by, source_error, "
    "reason, created_at, updated_at, seq"
)
MAX_CONTENT = 2000
MAX_SOURCES = 20
MAX_SECTION = 4000


def _owner(scope: Scope) -> tuple[str, str, str]:
    return (scope.tenant, scope.user, scope.agent_key)


def _in(n: int) -> str:
    return ", ".join("?" * n)


def _fact(row: Row, sources: Sequence[FactSource] = ()) -> Fact:
    return Fact(
        id=row[0],
        content=row[1],
        category=row[2],
        confidence=float(row[3]),
        status=FactStatus(row[4]),
        origin=FactOrigin(row[5]),
        agent=row[6] or None,
        superseded_by=row[7],
        source_error=row[8],
        reason=row[9],
        sources=tuple(sources),
        created_at=from_micros(row[10]),
        updated_at=from_micros(row[11]),
    )


def _sources(ids: Sequence[str]) -> Op[dict[str, list[FactSource]]]:
    out: dict[str, list[FactSource]] = {i: [] for i in ids}
    if not ids:
        return out
    rows = yield Query(
        f"SELECT fact_id, conversation_id, message_id FROM fact_sources WHERE fact_id IN ({_in(len(ids))}) "
        "ORDER BY fact_id, conversation_id, message_id",
        list(ids),
    )
    for fid, cid, mid in rows:
        out[fid].append(FactSource(cid, mid or None))
    return out


def _with_sources(rows: Sequence[Row]) -> Op[list[Fact]]:
    src = yield from _sources([r[0] for r in rows])
    return [_fact(r, src[r[0]]) for r in rows]


# -- input checks ---------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class FactInput:
    content: str
    category: str
    confidence: float
    source_error: str | None


def check_fact_input(
    content: object, category: object, confidence: object, source_error: object
) -> FactInput:
    if not isinstance(content, str) or not content.strip():
        raise InvalidInput("content must be a non-empty string", field="content")
    check_text(content, "content")
    text = " ".join(content.split())
    if len(text) > MAX_CONTENT:
        raise InvalidInput(f"content is over {MAX_CONTENT} characters", field="content")
    if not isinstance(category, str) or category not in CATEGORIES:
        raise InvalidInput(f"category must be one of {', '.join(CATEGORIES)}", field="category")
    if (
        isinstance(confidence, bool)
        or not isinstance(confidence, int | float)
        or not 0.0 <= float(confidence) <= 1.0
    ):
        raise InvalidInput("confidence must be a number in 0..1", field="confidence")
    if source_error is not None and (
        not isinstance(source_error, str) or len(source_error) > MAX_CONTENT
    ):
        raise InvalidInput(
            f"source_error must be a string of at most {MAX_CONTENT} characters",
            field="source_error",
        )
    check_text(source_error, "source_error")
    return FactInput(text, category, float(confidence), source_error or None)


# -- reading --------------------------------------------------------------------------------


def get_fact(scope: Scope, fact_id: str) -> Op[Fact]:
    rows = yield Query(
        f"SELECT {_COLUMNS} FROM facts WHERE id = ? AND {_OWNER}", (fact_id, *_owner(scope))
    )
    if not rows:
        raise NotFound(f"fact {fact_id} not found", kind="fact")
    return (yield from _with_sources(rows))[0]


def list_facts(
    rt: Runtime,
    scope: Scope,
    *,
    status: FactStatus | None = FactStatus.ACTIVE,
    category: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
) -> Op[Page[Fact]]:
    """Newest first; ``status=None`` lists every fact, superseded and evicted ones too."""
    n = page_limit(rt, limit)
    before = seq_cursor(cursor)
    where = [_OWNER, "seq < ?"]
    params: list[Any] = [*_owner(scope), before if before is not None else 2**62]
    if status is not None:
        where.append("status = ?")
        params.append(status.value)
    if category is not None:
        if category not in CATEGORIES:
            raise InvalidInput(f"category must be one of {', '.join(CATEGORIES)}", field="category")
        where.append("category = ?")
        params.append(category)
    rows = yield Query(
        f"SELECT {_COLUMNS} FROM facts WHERE {' AND '.join(where)} ORDER BY seq DESC LIMIT ?",
        (*params, n + 1),
    )
    items = yield from _with_sources(rows[:n])
    nxt = encode_cursor(rows[n - 1][-1]) if len(rows) > n else None
    return Page(items, nxt)


def active_facts(scope: Scope) -> Op[list[tuple[Fact, int]]]:
    """Every active fact of the owner with its storage order (oldest first)."""
    rows = yield Query(
        f"SELECT {_COLUMNS} FROM facts WHERE {_OWNER} AND status = 'active' ORDER BY seq",
        _owner(scope),
    )
    return [(_fact(r), int(r[-1])) for r in rows]


def as_active(facts: Iterable[tuple[Fact, int]]) -> list[ActiveFact]:
    """The planner's view, with the aliases the prompt uses (``f1``, ``f2``, ...)."""
    return [
        ActiveFact(f.id, f"f{i}", content_key(f.content), f.confidence, f.origin, seq)
        for i, (f, seq) in enumerate(facts, 1)
    ]


def fact_history(scope: Scope, fact_id: str) -> Op[list[FactEvent]]:
    """Events of the fact and of every fact it superseded or was superseded by, oldest first."""
    yield from get_fact(scope, fact_id)
    chain = {fact_id}
    frontier = [fact_id]
    while frontier and len(chain) < 200:
        marks = _in(len(frontier))
        rows = yield Query(
            f"SELECT id, superseded_by FROM facts WHERE {_OWNER} AND "
            f"(superseded_by IN ({marks}) OR id IN ({marks}))",
            (*_owner(scope), *frontier, *frontier),
        )
        nxt = []
        for fid, by in rows:
            for other in (fid, by):
                if other is not None and other not in chain:
                    chain.add(other)
                    nxt.append(other)
        frontier = nxt
    ids = sorted(chain)
    rows = yield Query(
        "SELECT fact_id, event, content, category, confidence, reason, related_id, at FROM fact_events "
        f"WHERE tenant_id = ? AND user_id = ? AND fact_id IN ({_in(len(ids))}) ORDER BY seq",
        (scope.tenant, scope.user, *ids),
    )
    return [
        FactEvent(r[0], r[1], r[2], r[3], float(r[4]), r[5], r[6], from_micros(r[7])) for r in rows
    ]


def get_profile(scope: Scope) -> Op[list[ProfileSection]]:
    """The six sections in their fixed order; an unwritten one has an empty summary."""
    rows = yield Query(
        f"SELECT section, summary, updated_at FROM profile_sections WHERE {_OWNER}", _owner(scope)
    )
    found = {r[0]: ProfileSection(r[0], r[1], from_micros(r[2])) for r in rows}
    return [found.get(name, ProfileSection(name, "", None)) for name in PROFILE_SECTIONS]


# -- writing --------------------------------------------------------------------------------


def _bump_owner(rt: Runtime, scope: Scope) -> Op[None]:
    """First step of every update: serialises updates of one owner's memory. The user row
    is held first (the lock order of every write, see ``tenancy.ensure_user``), so a user
    delete, which takes it before this row, never deadlocks with an update."""
    now = rt.clock()
    yield from tenancy.ensure_user(scope.tenant, scope.user, now)
    yield Exec(
        "INSERT INTO memory_owners (tenant_id, user_id, agent_id, revision, updated_at) "
        "VALUES (?, ?, ?, 1, ?) ON CONFLICT (tenant_id, user_id, agent_id) DO UPDATE SET "
        "revision = memory_owners.revision + 1, updated_at = excluded.updated_at",
        (*_owner(scope), now),
    )


def _event(
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
    return Exec(
        "INSERT INTO fact_events (fact_id, tenant_id, user_id, event, content, category, confidence, "
        "reason, related_id, conversation_id, at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            fact_id,
            scope.tenant,
            scope.user,
            event,
            content,
            category,
            confidence,
            reason,
            related_id,
            conversation_id,
            rt.clock(),
        ),
    )


def _insert_fact(
    rt: Runtime,
    scope: Scope,
    data: FactInput,
    origin: FactOrigin,
    *,
    sources: Sequence[FactSource] = (),
    created_at: int | None = None,
    conversation_id: str | None = None,
    fact_id: str | None = None,
) -> Op[str]:
    fid = fact_id or rt.make_id()
    now = rt.clock()
    yield Exec(
        "INSERT INTO facts (id, tenant_id, user_id, agent_id, content, content_key, category, "
        "confidence, status, origin, source_error, created_at, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'active', ?, ?, ?, ?)",
        (
            fid,
            *_owner(scope),
            data.content,
            content_key(data.content),
            data.category,
            data.confidence,
            origin.value,
            data.source_error,
            created_at if created_at is not None else now,
            now,
        ),
    )
    for s in sources[:MAX_SOURCES]:
        yield Exec(
            "INSERT INTO fact_sources (fact_id, conversation_id, message_id) VALUES (?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            (fid, s.conversation_id, s.message_id or ""),
        )
    yield _event(
        rt,
        scope,
        fid,
        "created",
        data.content,
        data.category,
        data.confidence,
        reason=origin.value,
        conversation_id=conversation_id,
    )
    return fid


def _refuse_duplicate(scope: Scope, content: str, except_id: str | None = None) -> Op[None]:
    rows = yield Query(
        f"SELECT id FROM facts WHERE {_OWNER} AND content_key = ? AND status = 'active'",
        (*_owner(scope), content_key(content)),
    )
    if rows and rows[0][0] != except_id:
        raise Conflict(f"an active fact already says this ({rows[0][0]})", kind="fact")


def add_fact(
    rt: Runtime,
    scope: Scope,
    data: FactInput,
    origin: FactOrigin = FactOrigin.MANUAL,
    *,
    sources: Sequence[FactSource] = (),
    created_at: int | None = None,
    fact_id: str | None = None,
) -> Op[Fact]:
    """A fact added by hand (or imported): it stays until its user or a person removes it.

    ``fact_id`` is a client-chosen id: adding it again with the same fields returns the
    stored fact and writes nothing; any other fact under that id is a Conflict.
    """
    if fact_id is not None:
        stored = yield from _same_fact(scope, fact_id, data)
        if stored is not None:
            return stored
    yield from _bump_owner(rt, scope)
    yield from _refuse_duplicate(scope, data.content)
    fid = yield from _insert_fact(
        rt, scope, data, origin, sources=sources, created_at=created_at, fact_id=fact_id
    )
    return (yield from get_fact(scope, fid))


def _same_fact(scope: Scope, fact_id: str, data: FactInput) -> Op[Fact | None]:
    """The idempotency check for a client-chosen fact id (None: the id is free)."""
    rows = yield Query("SELECT tenant_id, user_id, agent_id FROM facts WHERE id = ?", (fact_id,))
    if not rows:
        return None
    clash = Conflict(f"fact {fact_id} already exists with other content", kind="fact")
    if tuple(rows[0]) != _owner(scope):
        raise clash
    stored = yield from get_fact(scope, fact_id)
    same = (stored.content, stored.category, stored.confidence, stored.source_error) == (
        data.content,
        data.category,
        data.confidence,
        data.source_error,
    )
    if not same:
        raise clash
    return stored


def edit_fact(rt: Runtime, scope: Scope, fact_id: str, changes: dict[str, Any]) -> Op[Fact]:
    """Change an active fact in place (its previous version stays in its history)."""
    old = yield from get_fact(scope, fact_id)
    if old.status is not FactStatus.ACTIVE:
        raise Conflict(f"fact {fact_id} is {old.status.value}; only active facts can be edited")
    unknown = set(changes) - {"content", "category", "confidence", "source_error"}
    if unknown:
        raise InvalidInput(
            f"unknown fields: {', '.join(sorted(unknown))}", field=sorted(unknown)[0]
        )
    data = check_fact_input(
        changes.get("content", old.content),
        changes.get("category", old.category),
        changes.get("confidence", old.confidence),
        changes.get("source_error", old.source_error),
    )
    yield from _bump_owner(rt, scope)
    yield from _refuse_duplicate(scope, data.content, except_id=fact_id)
    yield _event(rt, scope, fact_id, "edited", old.content, old.category, old.confidence)
    yield Exec(
        "UPDATE facts SET content = ?, content_key = ?, category = ?, confidence = ?, "
        f"source_error = ?, updated_at = ? WHERE id = ? AND {_OWNER}",
        (
            data.content,
            content_key(data.content),
            data.category,
            data.confidence,
            data.source_error,
            rt.clock(),
            fact_id,
            *_owner(scope),
        ),
    )
    return (yield from get_fact(scope, fact_id))


def _erase(ids: Sequence[str]) -> Op[None]:
    """Erase facts for good: rows, sources, history, and pointers to them."""
    if not ids:
        return
    marks = _in(len(ids))
    yield Exec(f"DELETE FROM fact_sources WHERE fact_id IN ({marks})", ids)
    yield Exec(
        f"DELETE FROM fact_events WHERE fact_id IN ({marks}) OR related_id IN ({marks})",
        [*ids, *ids],
    )
    yield Exec(f"UPDATE facts SET superseded_by = NULL WHERE superseded_by IN ({marks})", ids)
    yield Exec(f"DELETE FROM facts WHERE id IN ({marks})", ids)


def delete_fact(rt: Runtime, scope: Scope, fact_id: str) -> Op[None]:
    """Erase a fact (any origin): what a person asks to forget is not kept as history."""
    yield from get_fact(scope, fact_id)
    yield from _bump_owner(rt, scope)
    yield from _erase([fact_id])


def set_profile(
    rt: Runtime, scope: Scope, sections: dict[str, str], conversation_id: str | None = None
) -> Op[None]:
    now = rt.clock()
    for name, summary in sorted(sections.items()):
        if name not in PROFILE_SECTIONS:
            raise InvalidInput(f"unknown profile section {name!r}", field=name)
        if len(summary) > MAX_SECTION:
            raise InvalidInput(f"profile {name} is over {MAX_SECTION} characters", field=name)
        check_text(summary, name)
        yield Exec(
            "INSERT INTO profile_sections (tenant_id, user_id, agent_id, section, summary, updated_at) "
            "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, user_id, agent_id, section) "
            "DO UPDATE SET summary = excluded.summary, updated_at = excluded.updated_at",
            (*_owner(scope), name, summary, now),
        )
        if conversation_id is not None:
            yield Exec(
                "INSERT INTO profile_sources (tenant_id, user_id, agent_id, section, conversation_id) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (*_owner(scope), name, conversation_id),
            )


# -- one extraction --------------------------------------------------------------------------


def seen_among(conversation_id: str, message_ids: Sequence[str]) -> Op[set[str]]:
    seen: set[str] = set()
    for start in range(0, len(message_ids), 500):
        batch = list(message_ids[start : start + 500])
        rows = yield Query(
            f"SELECT message_id FROM longterm_seen WHERE conversation_id = ? AND message_id IN ({_in(len(batch))})",
            (conversation_id, *batch),
        )
        seen.update(r[0] for r in rows)
    return seen


def mark_seen(conversation_id: str, message_ids: Iterable[str]) -> Op[None]:
    for mid in message_ids:
        yield Exec(
            "INSERT INTO longterm_seen (conversation_id, message_id) VALUES (?, ?) ON CONFLICT DO NOTHING",
            (conversation_id, mid),
        )


@dataclass(frozen=True, slots=True)
class ExtractionRecord:
    """What the update log keeps of one extraction attempt."""

    outcome: str  # applied | empty | failed
    conversation_id: str | None
    job_id: str | None
    signals: tuple[str, ...]
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int
    counts: dict[str, int]
    notes: tuple[str, ...] = ()
    raw_output: str | None = None
    error: str | None = None


def record_update(rt: Runtime, scope: Scope, rec: ExtractionRecord) -> Op[str]:
    uid = rt.make_id()
    yield Exec(
        "INSERT INTO longterm_updates (id, tenant_id, user_id, agent_id, conversation_id, job_id, "
        "outcome, signals, llm_calls, prompt_tokens, completion_tokens, counts, notes, raw_output, "
        "error, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            uid,
            *_owner(scope),
            rec.conversation_id,
            rec.job_id,
            rec.outcome,
            dump_json(list(rec.signals)),
            rec.llm_calls,
            rec.prompt_tokens,
            rec.completion_tokens,
            dump_json(rec.counts),
            dump_json(list(rec.notes)),
            None if rec.raw_output is None else rec.raw_output[:100_000],
            None if rec.error is None else rec.error[:4000],
            rt.clock(),
        ),
    )
    return uid


def list_updates(scope: Scope, limit: int = 50) -> Op[list[dict[str, Any]]]:
    """The extraction log of the owner, newest first."""
    rows = yield Query(
        "SELECT id, conversation_id, job_id, outcome, signals, llm_calls, prompt_tokens, "
        f"completion_tokens, counts, notes, raw_output, error, created_at FROM longterm_updates "
        f"WHERE {_OWNER} ORDER BY seq DESC LIMIT ?",
        (*_owner(scope), max(1, min(limit, 500))),
    )
    return [
        {
            "id": r[0],
            "conversation_id": r[1],
            "job_id": r[2],
            "outcome": r[3],
            "signals": json.loads(r[4]) if r[4] else [],
            "llm_calls": r[5],
            "prompt_tokens": r[6],
            "completion_tokens": r[7],
            "counts": json.loads(r[8]) if r[8] else {},
            "notes": json.loads(r[9]) if r[9] else [],
            "raw_output": r[10],
            "error": r[11],
            "created_at": from_micros(r[12]).isoformat(),
        }
        for r in rows
    ]


def current_state(scope: Scope) -> Op[tuple[list[tuple[Fact, int]], list[ProfileSection]]]:
    facts = yield from active_facts(scope)
    profile = yield from get_profile(scope)
    return facts, profile


def export_state(scope: Scope) -> Op[tuple[list[Fact], list[ProfileSection]]]:
    """Active facts with their provenance, and the profile (for an export)."""
    rows = yield Query(
        f"SELECT {_COLUMNS} FROM facts WHERE {_OWNER} AND status = 'active' ORDER BY seq",
        _owner(scope),
    )
    facts = yield from _with_sources(rows)
    profile = yield from get_profile(scope)
    return facts, profile


def apply_plan(
    rt: Runtime,
    scope: Scope,
    conversation_id: str | None,
    plan: UpdatePlan,
    sources: Sequence[FactSource],
    origin: FactOrigin = FactOrigin.EXTRACTED,
) -> Op[None]:
    """Execute a plan made against the current active facts (the caller planned it inside
    this transaction, after :func:`lock_owner`)."""
    now = rt.clock()
    new_ids: dict[int, str] = {}
    for n in plan.new:
        data = FactInput(n.content, n.category, n.confidence, n.source_error)
        new_ids[n.index] = yield from _insert_fact(
            rt, scope, data, origin, sources=sources, conversation_id=conversation_id
        )
    marks: list[tuple[str, str, str | None, str]] = [
        (old, "superseded", target if isinstance(target, str) else new_ids[target], reason)
        for old, target, reason in plan.superseded
    ]
    marks += [(old, "removed", None, reason) for old, reason in plan.removed]
    marks += [(old, "evicted", None, "over the cap on active facts") for old in plan.evicted]
    for fid, status, by, reason in marks:
        rows = yield Query(
            f"SELECT content, category, confidence FROM facts WHERE id = ? AND {_OWNER} AND status = 'active'",
            (fid, *_owner(scope)),
        )
        if not rows:
            continue
        yield Exec(
            "UPDATE facts SET status = ?, superseded_by = ?, reason = ?, changed_in = ?, updated_at = ? "
            f"WHERE id = ? AND {_OWNER}",
            (status, by, reason, conversation_id, now, fid, *_owner(scope)),
        )
        yield _event(
            rt,
            scope,
            fid,
            status,
            rows[0][0],
            rows[0][1],
            float(rows[0][2]),
            reason=reason,
            related_id=by,
            conversation_id=conversation_id,
        )
    if plan.profile:
        yield from set_profile(rt, scope, plan.profile, conversation_id)


def lock_owner(rt: Runtime, scope: Scope) -> Op[None]:
    """Take the owner's update lock (first statement of an update transaction)."""
    yield from _bump_owner(rt, scope)


# -- forgetting --------------------------------------------------------------------------------


def forget_messages(conversation_id: str, ids: Sequence[str]) -> Op[None]:
    """Cascade step for single deleted messages: they leave the provenance of facts (an
    extracted fact with no source left is erased) and the extraction watermark."""
    marks = _in(len(ids))
    rows = yield Query(
        f"SELECT DISTINCT fact_id FROM fact_sources WHERE conversation_id = ? "
        f"AND message_id IN ({marks})",
        (conversation_id, *ids),
    )
    touched = [r[0] for r in rows]
    yield Exec(
        f"DELETE FROM fact_sources WHERE conversation_id = ? AND message_id IN ({marks})",
        (conversation_id, *ids),
    )
    if touched:
        orphans = yield Query(
            f"SELECT id FROM facts WHERE id IN ({_in(len(touched))}) AND origin = 'extracted' "
            "AND NOT EXISTS (SELECT 1 FROM fact_sources s WHERE s.fact_id = facts.id)",
            touched,
        )
        yield from _erase([r[0] for r in orphans])
    yield Exec(
        f"DELETE FROM longterm_seen WHERE conversation_id = ? AND message_id IN ({marks})",
        (conversation_id, *ids),
    )


def forget_conversations(ids: Sequence[str]) -> Op[None]:
    """Cascade step: a deleted conversation leaves no trace in long-term memory.

    Its messages leave the provenance of facts; an extracted fact with no source left is
    erased; a status change its extraction made (superseded, removed, evicted) is undone;
    profile sections written from it are cleared; its extraction log and watermark go.
    """
    marks = _in(len(ids))
    rows = yield Query(
        f"SELECT DISTINCT fact_id FROM fact_sources WHERE conversation_id IN ({marks})", ids
    )
    touched = [r[0] for r in rows]
    yield Exec(f"DELETE FROM fact_sources WHERE conversation_id IN ({marks})", ids)
    if touched:
        orphans = yield Query(
            f"SELECT id FROM facts WHERE id IN ({_in(len(touched))}) AND origin = 'extracted' "
            "AND NOT EXISTS (SELECT 1 FROM fact_sources s WHERE s.fact_id = facts.id)",
            touched,
        )
        yield from _erase([r[0] for r in orphans])
    # Undo what the forgotten conversation's extractions changed. Two facts may now say
    # the same thing actively; the newer restored one stays marked rather than collide.
    changed = yield Query(
        f"SELECT id, tenant_id, user_id, agent_id, content_key FROM facts WHERE changed_in IN ({marks}) ORDER BY seq",
        ids,
    )
    for fid, tenant, user, agent, key in changed:
        clash = yield Query(
            "SELECT 1 FROM facts WHERE tenant_id = ? AND user_id = ? AND agent_id = ? "
            "AND content_key = ? AND status = 'active'",
            (tenant, user, agent, key),
        )
        if clash:
            yield Exec(
                "UPDATE facts SET reason = NULL, changed_in = NULL, superseded_by = NULL WHERE id = ?",
                (fid,),
            )
        else:
            yield Exec(
                "UPDATE facts SET status = 'active', reason = NULL, changed_in = NULL, "
                "superseded_by = NULL WHERE id = ?",
                (fid,),
            )
    yield Exec(f"DELETE FROM fact_events WHERE conversation_id IN ({marks})", ids)
    sections = yield Query(
        "SELECT DISTINCT tenant_id, user_id, agent_id, section FROM profile_sources "
        f"WHERE conversation_id IN ({marks})",
        ids,
    )
    for tenant, user, agent, section in sections:
        yield Exec(
            "DELETE FROM profile_sections WHERE tenant_id = ? AND user_id = ? AND agent_id = ? AND section = ?",
            (tenant, user, agent, section),
        )
        yield Exec(
            "DELETE FROM profile_sources WHERE tenant_id = ? AND user_id = ? AND agent_id = ? AND section = ?",
            (tenant, user, agent, section),
        )
    yield Exec(f"DELETE FROM longterm_updates WHERE conversation_id IN ({marks})", ids)
    yield Exec(f"DELETE FROM longterm_seen WHERE conversation_id IN ({marks})", ids)


def forget_user(tenant: str, user: str) -> Op[None]:
    """Cascade step: everything long-term of the user, every agent, every origin."""
    yield Exec(
        "DELETE FROM fact_sources WHERE fact_id IN (SELECT id FROM facts WHERE tenant_id = ? AND user_id = ?)",
        (tenant, user),
    )
    for table in (
        "fact_events",
        "facts",
        "profile_sections",
        "profile_sources",
        "longterm_updates",
        "memory_owners",
    ):
        yield Exec(f"DELETE FROM {table} WHERE tenant_id = ? AND user_id = ?", (tenant, user))


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
    yield from _bump_owner(rt, scope)
    if profile:
        yield from set_profile(rt, scope, profile)
    added = duplicates = 0
    for fact in facts:
        rows = yield Query(
            f"SELECT 1 FROM facts WHERE {_OWNER} AND content_key = ? AND status = 'active'",
            (*_owner(scope), content_key(fact.data.content)),
        )
        if rows:
            duplicates += 1
            continue
        fid = fact.fact_id
        if fid is not None and (yield Query("SELECT 1 FROM facts WHERE id = ?", (fid,))):
            fid = None
        sources = [FactSource(fact.source, "")] if fact.source else []
        yield from _insert_fact(
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
    rows = yield Query(f"SELECT max(updated_at) FROM memory_owners WHERE {_OWNER}", _owner(scope))
    times = [rows[0][0]] if rows and rows[0][0] is not None else []
    for table in ("facts", "profile_sections"):
        found = yield Query(f"SELECT max(updated_at) FROM {table} WHERE {_OWNER}", _owner(scope))
        if found and found[0][0] is not None:
            times.append(found[0][0])
    return from_micros(max(int(t) for t in times)) if times else None
