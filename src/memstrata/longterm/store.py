"""Facts and profiles in SQL (sans-IO operations, every backend): input checks, reading,
adding, editing and deleting facts, and applying an extraction's plan.

Every statement filters by the owner ``(tenant, user, agent)``: a fact of another
user, or of another agent of the same user, is "not found", exactly like a
conversation of theirs. The extraction log is :mod:`~memstrata.longterm.updates`, the
cascade steps :mod:`~memstrata.longterm.forget`, import and export
:mod:`~memstrata.longterm.portable`; rows are read in :mod:`~memstrata.longterm.rows`.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memstrata.errors import Conflict, InvalidInput, NotFound
from memstrata.longterm import versions
from memstrata.longterm.apply import ActiveFact, UpdatePlan, content_key
from memstrata.longterm.clocks import TRUE_AT, AsOf, clamp_end
from memstrata.longterm.model import (
    CATEGORIES,
    PROFILE_SECTIONS,
    Fact,
    FactEvent,
    FactOrigin,
    FactSource,
    FactStatus,
    ProfileSection,
)
from memstrata.longterm.rows import (
    COLUMNS,
    MAX_CONTENT,
    MAX_SECTION,
    MAX_SOURCES,
    OWNER,
    bump_owner,
    erase,
    event_reason,
    event_row,
    event_text,
    fact_text,
    owner,
    seal_fact,
    seal_reason,
    seal_section,
    seal_source_error,
    section_text,
    seq_of,
    stored_key,
    to_fact,
    with_sources,
)
from memstrata.runtime import Runtime, page_limit
from memstrata.storage.plan import Exec, Op, Query
from memstrata.storage.records import check_text, from_micros
from memstrata.storage.sql import encode_cursor, placeholders, seq_cursor
from memstrata.types import Page, Scope

__all__ = [
    "MAX_SOURCES",
    "FactInput",
    "active_facts",
    "add_fact",
    "apply_plan",
    "as_active",
    "check_fact_input",
    "current_state",
    "delete_fact",
    "edit_fact",
    "fact_history",
    "get_fact",
    "get_profile",
    "insert_fact",
    "list_facts",
    "lock_owner",
    "set_profile",
    "true_facts",
]


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
        f"SELECT {COLUMNS} FROM facts WHERE id = ? AND {OWNER}", (fact_id, *owner(scope))
    )
    if not rows:
        raise NotFound(f"fact {fact_id} not found", kind="fact")
    return (yield from with_sources(rows))[0]


def list_facts(
    rt: Runtime,
    scope: Scope,
    *,
    status: FactStatus | None = FactStatus.ACTIVE,
    category: str | None = None,
    limit: int | None = None,
    cursor: str | None = None,
    at: AsOf | None = None,
) -> Op[Page[Fact]]:
    """Newest first; ``status=None`` lists every fact, superseded and evicted ones too.

    ``status=active`` means *true now* (active, and valid now in event time); with
    ``at``, the facts true at ``at.valid_at`` as known at ``at.known_at`` (see
    :mod:`~memstrata.longterm.clocks`), which only combines with ``active``."""
    n = page_limit(rt, limit)
    before = seq_cursor(cursor)
    where = [OWNER, "seq < ?"]
    params: list[Any] = [*owner(scope), before if before is not None else 2**62]
    if at is not None:
        if status is not FactStatus.ACTIVE:
            raise InvalidInput("as_of and known_at list active facts only", field="status")
        sql, values = at.where()
        where.append(sql)
        params.extend(values)
    elif status is FactStatus.ACTIVE:
        now = rt.clock()
        where.append(TRUE_AT)
        params.extend((now, now))
    elif status is not None:
        where.append("status = ?")
        params.append(status.value)
    if category is not None:
        if category not in CATEGORIES:
            raise InvalidInput(f"category must be one of {', '.join(CATEGORIES)}", field="category")
        where.append("category = ?")
        params.append(category)
    source = "facts" if at is None else versions.KNOWN_FACTS  # edits' versions too
    rows = yield Query(
        f"SELECT {COLUMNS} FROM {source} WHERE {' AND '.join(where)} ORDER BY seq DESC LIMIT ?",
        (*params, n + 1),
    )
    items = yield from with_sources(rows[:n])
    nxt = encode_cursor(seq_of(rows[n - 1])) if len(rows) > n else None
    return Page(items, nxt)


def active_facts(scope: Scope) -> Op[list[tuple[Fact, int]]]:
    """Every active fact of the owner with its storage order (oldest first)."""
    rows = yield Query(
        f"SELECT {COLUMNS} FROM facts WHERE {OWNER} AND status = 'active' ORDER BY seq",
        owner(scope),
    )
    return [(to_fact(r), seq_of(r)) for r in rows]


def true_facts(scope: Scope, now: int, at: AsOf | None = None) -> Op[list[Fact]]:
    """What the context injects: the facts true now (or at ``at``), oldest first."""
    sql, params = (TRUE_AT, (now, now)) if at is None else at.where()
    source = "facts" if at is None else versions.KNOWN_FACTS
    rows = yield Query(
        f"SELECT {COLUMNS} FROM {source} WHERE {OWNER} AND {sql} ORDER BY seq",
        (*owner(scope), *params),
    )
    return [to_fact(r) for r in rows]


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
        marks = placeholders(len(frontier))
        rows = yield Query(
            f"SELECT id, superseded_by FROM facts WHERE {OWNER} AND "
            f"(superseded_by IN ({marks}) OR id IN ({marks}))",
            (*owner(scope), *frontier, *frontier),
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
        f"WHERE tenant_id = ? AND user_id = ? AND fact_id IN ({placeholders(len(ids))}) ORDER BY seq",
        (scope.tenant, scope.user, *ids),
    )
    return [
        FactEvent(
            fid,
            event,
            event_text(fid, event, at, content),
            category,
            float(confidence),
            event_reason(fid, event, at, reason),
            related,
            from_micros(at),
        )
        for fid, event, content, category, confidence, reason, related, at in rows
    ]


def get_profile(
    scope: Scope, known_at: int | None = None, valid_at: int | None = None
) -> Op[list[ProfileSection]]:
    """The six sections in their fixed order; an unwritten one has an empty summary.
    ``known_at``: each section as it held at ``valid_at`` (default ``known_at``) as known
    then, a rewritten one in the version it had (see :mod:`~memstrata.longterm.versions`)."""
    if known_at is not None:
        held = versions.section_at(
            (yield from versions.profile_rows(scope)),
            known_at if valid_at is None else valid_at,
            known_at,
        )
        return [
            ProfileSection(name, row[1], from_micros(row[2]), _time(row[3]), _time(row[5]))
            if (row := held.get(name)) is not None
            else ProfileSection(name, "", None)
            for name in PROFILE_SECTIONS
        ]
    rows = yield Query(
        "SELECT section, summary, updated_at, valid_from, recorded_at FROM profile_sections "
        f"WHERE {OWNER}",
        owner(scope),
    )
    found = {
        name: ProfileSection(
            name, section_text(scope, name, summary), from_micros(at), _time(since), _time(recorded)
        )
        for name, summary, at, since, recorded in rows
    }
    return [found.get(name, ProfileSection(name, "", None)) for name in PROFILE_SECTIONS]


def _time(value: int | None) -> datetime | None:
    return None if value is None else from_micros(value)


# -- writing --------------------------------------------------------------------------------


def insert_fact(
    rt: Runtime,
    scope: Scope,
    data: FactInput,
    origin: FactOrigin,
    *,
    sources: Sequence[FactSource] = (),
    created_at: int | None = None,
    conversation_id: str | None = None,
    fact_id: str | None = None,
    valid_from: int | None = None,
    valid_to: int | None = None,
    start_unknown: bool = False,
) -> Op[str]:
    """``valid_from`` defaults to ``created_at`` (the data's own time on an import), else
    now; ``recorded_at`` is always now (when memstrata learned it). ``start_unknown``:
    the fact held since a time nobody said (stored as no start)."""
    fid = fact_id or rt.make_id()
    now = rt.clock()
    since: int | None = valid_from if valid_from is not None else created_at
    since = None if start_unknown else now if since is None else since
    until = None if valid_to is None else clamp_end(since, valid_to)
    yield Exec(
        "INSERT INTO facts (id, tenant_id, user_id, agent_id, content, content_key, category, "
        "confidence, status, origin, source_error, created_at, updated_at, valid_from, "
        "valid_to, recorded_at) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 'active', ?, ?, ?, ?, ?, ?, ?)",
        (
            fid,
            *owner(scope),
            seal_fact(scope, fid, data.content),
            stored_key(scope, data.content),
            data.category,
            data.confidence,
            origin.value,
            seal_source_error(scope, fid, data.source_error),
            created_at if created_at is not None else now,
            now,
            since,
            until,
            now,
        ),
    )
    for s in sources[:MAX_SOURCES]:
        yield Exec(
            "INSERT INTO fact_sources (fact_id, conversation_id, message_id) VALUES (?, ?, ?) "
            "ON CONFLICT DO NOTHING",
            (fid, s.conversation_id, s.message_id or ""),
        )
    yield event_row(
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
        f"SELECT id FROM facts WHERE {OWNER} AND content_key = ? AND status = 'active'",
        (*owner(scope), stored_key(scope, content)),
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
    yield from bump_owner(rt, scope)
    yield from _refuse_duplicate(scope, data.content)
    fid = yield from insert_fact(
        rt, scope, data, origin, sources=sources, created_at=created_at, fact_id=fact_id
    )
    return (yield from get_fact(scope, fid))


def _same_fact(scope: Scope, fact_id: str, data: FactInput) -> Op[Fact | None]:
    """The idempotency check for a client-chosen fact id (None: the id is free)."""
    rows = yield Query("SELECT tenant_id, user_id, agent_id FROM facts WHERE id = ?", (fact_id,))
    if not rows:
        return None
    clash = Conflict(f"fact {fact_id} already exists with other content", kind="fact")
    if tuple(rows[0]) != owner(scope):
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
    yield from bump_owner(rt, scope)
    yield from _refuse_duplicate(scope, data.content, except_id=fact_id)
    yield event_row(rt, scope, fact_id, "edited", old.content, old.category, old.confidence)
    # A new version in system time: the old one stays readable by known_at before now.
    yield from versions.keep_fact_version(scope, fact_id, rt.clock())
    yield Exec(
        "UPDATE facts SET content = ?, content_key = ?, category = ?, confidence = ?, "
        f"source_error = ?, updated_at = ? WHERE id = ? AND {OWNER}",
        (
            seal_fact(scope, fact_id, data.content),
            stored_key(scope, data.content),
            data.category,
            data.confidence,
            seal_source_error(scope, fact_id, data.source_error),
            rt.clock(),
            fact_id,
            *owner(scope),
        ),
    )
    return (yield from get_fact(scope, fact_id))


def delete_fact(rt: Runtime, scope: Scope, fact_id: str) -> Op[None]:
    """Erase a fact (any origin): what a person asks to forget is not kept as history."""
    yield from get_fact(scope, fact_id)
    yield from bump_owner(rt, scope)
    yield from erase([fact_id])


def set_profile(
    rt: Runtime,
    scope: Scope,
    sections: dict[str, str],
    conversation_id: str | None = None,
    valid_from: int | None = None,
) -> Op[None]:
    """Replace sections whole; ``valid_from`` (default now) is when their text holds from."""
    now = rt.clock()
    since = now if valid_from is None else valid_from
    for name, summary in sorted(sections.items()):
        if name not in PROFILE_SECTIONS:
            raise InvalidInput(f"unknown profile section {name!r}", field=name)
        if len(summary) > MAX_SECTION:
            raise InvalidInput(f"profile {name} is over {MAX_SECTION} characters", field=name)
        check_text(summary, name)
        yield from versions.keep_profile_version(scope, name, since, now)
        yield Exec(
            "INSERT INTO profile_sections (tenant_id, user_id, agent_id, section, summary, "
            "updated_at, valid_from, recorded_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (tenant_id, user_id, agent_id, section) DO UPDATE SET "
            "summary = excluded.summary, updated_at = excluded.updated_at, "
            "valid_from = excluded.valid_from, recorded_at = excluded.recorded_at",
            (*owner(scope), name, seal_section(scope, name, summary), now, since, now),
        )
        if conversation_id is not None:
            yield Exec(
                "INSERT INTO profile_sources (tenant_id, user_id, agent_id, section, conversation_id) "
                "VALUES (?, ?, ?, ?, ?) ON CONFLICT DO NOTHING",
                (*owner(scope), name, conversation_id),
            )


def current_state(scope: Scope) -> Op[tuple[list[tuple[Fact, int]], list[ProfileSection]]]:
    facts = yield from active_facts(scope)
    profile = yield from get_profile(scope)
    return facts, profile


def apply_plan(
    rt: Runtime,
    scope: Scope,
    conversation_id: str | None,
    plan: UpdatePlan,
    sources: Sequence[FactSource],
    origin: FactOrigin = FactOrigin.EXTRACTED,
    event_at: int | None = None,
) -> Op[None]:
    """Execute a plan made against the current active facts (the caller planned it inside
    this transaction, after :func:`lock_owner`).

    ``event_at`` (default now) is when what the plan learned happened in the world: the
    event time new facts hold from unless the model found another, and the end of the
    event time of what they supersede or remove (an eviction ends none: the world did not
    change). Every fact that stops being active is superseded now in system time."""
    now = rt.clock()
    event = now if event_at is None else event_at
    new_ids: dict[int, str] = {}
    starts: dict[str, int] = {}
    for n in plan.new:
        data = FactInput(n.content, n.category, n.confidence, n.source_error)
        since = event if n.valid_from is None else n.valid_from
        # "Until last week", said today: it held up to then, from a time nobody said.
        unknown = n.valid_from is None and n.valid_to is not None and n.valid_to <= since
        new_ids[n.index] = yield from insert_fact(
            rt,
            scope,
            data,
            origin,
            sources=sources,
            conversation_id=conversation_id,
            valid_from=since,
            valid_to=n.valid_to,
            start_unknown=unknown,
        )
        starts[new_ids[n.index]] = since
    marks: list[tuple[str, str, str | None, str, int | None]] = []
    for old, target, reason in plan.superseded:
        new = target if isinstance(target, str) else new_ids[target]
        # It stopped holding when its replacement began (a duplicate: at this event).
        marks.append((old, "superseded", new, reason, starts.get(new, event)))
    marks += [(old, "removed", None, reason, event) for old, reason in plan.removed]
    marks += [(old, "evicted", None, "over the cap on active facts", None) for old in plan.evicted]
    for fid, status, by, reason, ends in marks:
        rows = yield Query(
            "SELECT content, category, confidence, valid_from, valid_to FROM facts "
            f"WHERE id = ? AND {OWNER} AND status = 'active'",
            (fid, *owner(scope)),
        )
        if not rows:
            continue
        content, category, confidence, since, until = rows[0]
        if ends is not None:
            ends = clamp_end(since, ends if until is None else min(int(until), ends))
        else:
            ends = until
        yield Exec(
            "UPDATE facts SET status = ?, superseded_by = ?, reason = ?, changed_in = ?, "
            f"updated_at = ?, valid_to = ?, superseded_at = ? WHERE id = ? AND {OWNER}",
            (
                status,
                by,
                seal_reason(scope, fid, reason),
                conversation_id,
                now,
                ends,
                now,
                fid,
                *owner(scope),
            ),
        )
        yield event_row(
            rt,
            scope,
            fid,
            status,
            fact_text(fid, content),
            category,
            float(confidence),
            reason=reason,
            related_id=by,
            conversation_id=conversation_id,
        )
    if plan.profile:
        yield from set_profile(rt, scope, plan.profile, conversation_id, event_at)


def lock_owner(rt: Runtime, scope: Scope) -> Op[None]:
    """Take the owner's update lock (first statement of an update transaction)."""
    yield from bump_owner(rt, scope)
