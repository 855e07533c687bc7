"""Consolidation: merge near-duplicate facts and settle contradictions, by supersession only.

A consolidation is planned (pure: :func:`deterministic_plan`, or a model's proposal
checked by :func:`validate`), shown as a diff (a dry run changes nothing), and applied
by :func:`apply` in one write transaction. Applying never erases and never rewrites a
fact: each change marks the replaced facts ``superseded`` by the fact that carries
their content (an existing fact, or a new merged one), with a ``superseded`` event in
their history. Every fact a consolidation touches carries its id in ``reason``
(``consolidation <id>: ...``), so :func:`revert` can undo exactly that consolidation:
the superseded facts become active again (a ``restored`` event), and the merged facts
it created are superseded by the first fact restored — both steps stay in
``facts.history``.

Plan rules (a model's proposal that breaks one loses that change, with a note):

* a change supersedes at least one active fact, by a target: an active fact, or new
  content (a merge) that passes the fact checks;
* a fact appears in at most one change, and a target is never also superseded;
* new content equal (by content key) to one of the merged facts keeps that fact as the
  target; equal to another active fact, the change is dropped (it would duplicate it);
* a new merged fact takes the highest confidence of its group, the group's sources, and
  the origin ``manual`` when any merged fact was manual (``extracted`` otherwise).
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

from memstrata.domain.memory import Consolidation, ConsolidationChange, ConsolidationRevert
from memstrata.errors import Conflict, InvalidInput, NotFound
from memstrata.longterm.apply import content_key
from memstrata.longterm.health import brief, duplicate_groups
from memstrata.longterm.model import CATEGORIES, Fact, FactOrigin
from memstrata.longterm.rows import (
    OWNER,
    event_row,
    fact_text,
    load_sources,
    owner,
    seal_reason,
    stored_key,
)
from memstrata.longterm.store import (
    FactInput,
    active_facts,
    check_fact_input,
    insert_fact,
    lock_owner,
)
from memstrata.runtime import Runtime
from memstrata.storage.plan import Exec, Op, Query
from memstrata.types import Scope

__all__ = [
    "CONSOLIDATE_JOB",
    "Consolidation",
    "ConsolidationChange",
    "ConsolidationRevert",
    "Proposal",
    "ProposedChange",
    "apply",
    "deterministic_plan",
    "marker",
    "revert",
    "validate",
]

CONSOLIDATE_JOB = "longterm.consolidate"


def marker(consolidation_id: str) -> str:
    """The start of ``reason`` on every fact a consolidation touched."""
    return f"consolidation {consolidation_id}:"


# -- what a model proposes (by alias), before validation -----------------------------------


@dataclass(frozen=True, slots=True)
class ProposedChange:
    kind: str  # "merge" or "supersede"
    facts: tuple[str, ...]  # aliases: for "supersede", the facts replaced
    content: str | None = None  # merge: the merged content
    category: str | None = None
    by: str | None = None  # supersede: the alias of the fact that replaces them
    reason: str | None = None


@dataclass(frozen=True, slots=True)
class Proposal:
    changes: tuple[ProposedChange, ...]
    notes: tuple[str, ...] = ()


# -- planning (pure) ------------------------------------------------------------------------


def _rank(fact: Fact, seq: int) -> tuple[int, float, int]:
    # Keep a manual fact first, then the most confident, then the oldest (a stable id).
    return (0 if fact.origin is FactOrigin.MANUAL else 1, -fact.confidence, seq)


def deterministic_plan(
    facts: Sequence[tuple[Fact, int]],
    *,
    vectors: Sequence[Sequence[float]] | None = None,
    similarity: float = 0.92,
) -> list[ConsolidationChange]:
    """Merge each near-duplicate group into its best fact (manual, then most confident,
    then oldest): the others are superseded by it. Contradictions are left alone (no
    rule can tell which side is true; a model or a person decides)."""
    plain = [f for f, _ in facts]
    changes = []
    for group in duplicate_groups(plain, vectors=vectors, similarity=similarity):
        members = sorted((facts[i] for i in group), key=lambda p: _rank(*p))
        keep = members[0][0]
        changes.append(
            ConsolidationChange(
                kind="merge",
                superseded=tuple(brief(f) for f, _ in members[1:]),
                target_id=keep.id,
                content=keep.content,
                category=keep.category,
                new_fact=False,
                reason=f"near duplicate of {keep.id}",
            )
        )
    return changes


def validate(
    proposal: Proposal, facts: Sequence[tuple[Fact, int]], aliases: Sequence[str]
) -> tuple[list[ConsolidationChange], list[str]]:
    """The changes of ``proposal`` that follow the plan rules (``aliases[i]`` names
    ``facts[i]``), and a note for each one dropped or adjusted."""
    by_alias = {a: f for a, (f, _) in zip(aliases, facts, strict=True)}
    by_key = {content_key(f.content): f for f, _ in facts}
    notes = list(proposal.notes)
    used: set[str] = set()  # superseded facts
    targets: set[str] = set()
    out: list[ConsolidationChange] = []
    for n, change in enumerate(proposal.changes):
        where = f"{change.kind}[{n}]"
        unknown = [a for a in (*change.facts, change.by or "") if a and a not in by_alias]
        if unknown:
            notes.append(f"{where}: unknown fact(s) {', '.join(unknown)}, dropped")
            continue
        group = [by_alias[a] for a in dict.fromkeys(change.facts)]
        if change.kind == "merge":
            built = _merge(change, group, by_key, where, notes)
        else:
            built = _supersede(change, group, by_alias, where, notes)
        if built is None:
            continue
        ids = {b.id for b in built.superseded}
        if ids & (used | targets) or (built.target_id is not None and built.target_id in used):
            notes.append(f"{where}: a fact already in another change, dropped")
            continue
        used |= ids
        if built.target_id is not None:
            targets.add(built.target_id)
        out.append(built)
    return out, notes


def _merge(
    change: ProposedChange,
    group: list[Fact],
    by_key: dict[str, Fact],
    where: str,
    notes: list[str],
) -> ConsolidationChange | None:
    if len(group) < 2:
        notes.append(f"{where}: a merge needs two facts or more, dropped")
        return None
    try:
        data = check_fact_input(change.content, group[0].category, 1.0, None)
    except InvalidInput as exc:
        notes.append(f"{where}: {exc.message}, dropped")
        return None
    category = change.category if change.category in CATEGORIES else group[0].category
    reason = change.reason or "merged near duplicates"
    twin = by_key.get(content_key(data.content))
    if twin is not None and twin.id not in {f.id for f in group}:
        notes.append(f"{where}: the merged content repeats {twin.id}, dropped")
        return None
    if twin is not None:  # the merged content is one of the facts: keep that one
        rest = tuple(brief(f) for f in group if f.id != twin.id)
        return ConsolidationChange(
            "merge", rest, twin.id, twin.content, twin.category, False, reason
        )
    return ConsolidationChange(
        "merge", tuple(brief(f) for f in group), None, data.content, category, True, reason
    )


def _supersede(
    change: ProposedChange,
    group: list[Fact],
    by_alias: dict[str, Fact],
    where: str,
    notes: list[str],
) -> ConsolidationChange | None:
    target = by_alias.get(change.by or "")
    if target is None:
        notes.append(f"{where}: names no fact that replaces them, dropped")
        return None
    old = [f for f in group if f.id != target.id]
    if not old:
        notes.append(f"{where}: a fact cannot replace itself, dropped")
        return None
    reason = change.reason or "contradicted by a newer fact"
    return ConsolidationChange(
        "supersede",
        tuple(brief(f) for f in old),
        target.id,
        target.content,
        target.category,
        False,
        reason,
    )


# -- applying and reverting (sans-IO, in one write transaction) -----------------------------


def apply(
    rt: Runtime, scope: Scope, consolidation_id: str, changes: Sequence[ConsolidationChange]
) -> Op[tuple[list[ConsolidationChange], list[str]]]:
    """Apply ``changes`` planned against the active facts; a change whose facts are no
    longer all active (the memory moved on) is skipped with a note. Returns the applied
    changes (new facts with their ids) and the notes."""
    yield from lock_owner(rt, scope)
    current = {f.id: f for f, _ in (yield from active_facts(scope))}
    mark = marker(consolidation_id)
    done: list[ConsolidationChange] = []
    notes: list[str] = []
    added: set[str] = set()  # content keys of the merged facts written so far
    for n, change in enumerate(changes):
        ids = [b.id for b in change.superseded]
        wanted = [*ids, *([] if change.new_fact else [change.target_id or ""])]
        if not ids or any(i not in current for i in wanted):
            notes.append(f"change {n}: its facts are no longer all active, skipped")
            continue
        keys = added | {content_key(f.content) for f in current.values()}
        if change.new_fact and content_key(change.content) in keys:
            # An active fact says it already (written since the plan): no second copy.
            notes.append(f"change {n}: an active fact already says its content, skipped")
            continue
        target = change.target_id
        if change.new_fact:
            target = yield from _insert_merged(rt, scope, change, [current[i] for i in ids], mark)
            added.add(content_key(change.content))
        assert target is not None
        for fid in ids:
            old = current.pop(fid)
            reason = f"{mark} {change.reason}"
            # The marker stays in clear (revert finds the facts by it), the words sealed.
            stored = seal_reason(scope, fid, str(change.reason), keep=f"{mark} ")
            yield Exec(
                "UPDATE facts SET status = 'superseded', superseded_by = ?, reason = ?, "
                f"updated_at = ? WHERE id = ? AND {OWNER} AND status = 'active'",
                (target, stored, rt.clock(), fid, *owner(scope)),
            )
            yield event_row(
                rt,
                scope,
                fid,
                "superseded",
                old.content,
                old.category,
                old.confidence,
                reason=reason,
                related_id=target,
            )
        done.append(replace(change, target_id=target))
    return done, notes


def _insert_merged(
    rt: Runtime, scope: Scope, change: ConsolidationChange, group: list[Fact], mark: str
) -> Op[str]:
    sources = yield from load_sources([f.id for f in group])
    merged = list(dict.fromkeys(s for f in group for s in sources[f.id]))
    manual = any(f.origin is FactOrigin.MANUAL for f in group)
    data = FactInput(change.content, change.category, max(f.confidence for f in group), None)
    origin = FactOrigin.MANUAL if manual else FactOrigin.EXTRACTED
    fid = yield from insert_fact(rt, scope, data, origin, sources=merged)
    yield Exec(
        f"UPDATE facts SET reason = ? WHERE id = ? AND {OWNER}",
        (f"{mark} merged from {len(group)} facts", fid, *owner(scope)),
    )
    return fid


def revert(rt: Runtime, scope: Scope, consolidation_id: str) -> Op[ConsolidationRevert]:
    """Undo consolidation ``consolidation_id`` through supersession: the facts it
    superseded become active again, and the merged facts it created (still active) are
    superseded by the first fact restored from them. NotFound when it left nothing to
    undo in this scope; Conflict (nothing written) when a restored fact would repeat an
    active one."""
    yield from lock_owner(rt, scope)
    mark = marker(consolidation_id)
    rows = yield Query(
        "SELECT id, content, category, confidence, superseded_by, status FROM facts "
        f"WHERE {OWNER} AND substr(reason, 1, ?) = ? ORDER BY seq",
        (*owner(scope), len(mark), mark),
    )
    superseded = [r for r in rows if r[5] == "superseded"]
    created = [r for r in rows if r[5] == "active"]
    if not superseded and not created:
        raise NotFound(f"consolidation {consolidation_id} not found", kind="consolidation")
    undone = f"reverted: consolidation {consolidation_id}"
    first_restored: dict[str, str] = {}
    for fid, _c, _cat, _conf, by, _s in superseded:
        first_restored.setdefault(str(by), fid)
    retired = []
    for fid, content, category, confidence, _by, _s in created:
        back = first_restored.get(fid)
        if back is None:  # none of its facts to restore: keep it, it is all that is left
            continue
        yield Exec(
            "UPDATE facts SET status = 'superseded', superseded_by = ?, reason = ?, "
            f"updated_at = ? WHERE id = ? AND {OWNER}",
            (back, undone, rt.clock(), fid, *owner(scope)),
        )
        yield event_row(
            rt,
            scope,
            fid,
            "superseded",
            fact_text(fid, content),
            category,
            float(confidence),
            reason=undone,
            related_id=back,
        )
        retired.append(fid)
    restored = []
    for fid, stored, category, confidence, by, _s in superseded:
        content = fact_text(fid, stored)  # opened: the twin test and the event need the words
        yield from _refuse_active_twin(scope, fid, content)
        yield Exec(
            "UPDATE facts SET status = 'active', superseded_by = NULL, reason = NULL, "
            f"updated_at = ? WHERE id = ? AND {OWNER}",
            (rt.clock(), fid, *owner(scope)),
        )
        yield event_row(
            rt,
            scope,
            fid,
            "restored",
            content,
            category,
            float(confidence),
            reason=undone,
            related_id=by,
        )
        restored.append(fid)
    return ConsolidationRevert(consolidation_id, tuple(restored), tuple(retired))


def _refuse_active_twin(scope: Scope, fact_id: str, content: str) -> Op[None]:
    rows = yield Query(
        f"SELECT id FROM facts WHERE {OWNER} AND content_key = ? AND status = 'active'",
        (*owner(scope), stored_key(scope, content)),
    )
    if rows and rows[0][0] != fact_id:
        raise Conflict(
            f"fact {fact_id} cannot be restored: the active fact {rows[0][0]} says the same",
            kind="fact",
        )
