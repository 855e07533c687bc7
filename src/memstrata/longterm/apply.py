"""Decide what one extraction changes in a user's memory (pure; the store executes it).

Rules, in order:

* profile sections are replaced whole, with upload mentions scrubbed out;
* a new fact needs ``confidence >= threshold`` and must not mention a file upload
  (uploads are per-conversation events, not facts about the user); a fact whose content key (case-folded, whitespace
  normalised) is already active, or that the caller found to be a near duplicate of an
  active fact, is not added again;
* a new fact that ``supersedes`` active facts marks them superseded by itself; when it
  was a duplicate, by the active fact it duplicates. Supersession and removal only
  follow an accepted fact or a stated reason, never a weak guess;
* at most ``max_facts`` facts stay active, kept by confidence (manual facts are never
  evicted by extraction); the rest are marked evicted. A new fact that would be evicted
  at once is not stored at all.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime

from memstrata.longterm.model import FactOrigin, ProposedUpdate
from memstrata.storage.records import to_micros

__all__ = ["ActiveFact", "NewFact", "UpdatePlan", "content_key", "plan_update"]

#: Facts the model could propose in one update beyond which the rest is ignored.
DEFAULT_THRESHOLD = 0.7
DEFAULT_MAX_FACTS = 100


def content_key(content: str) -> str:
    """What makes two facts "the same": case-folded, whitespace collapsed."""
    return " ".join(content.casefold().split())


@dataclass(frozen=True, slots=True)
class ActiveFact:
    id: str
    alias: str
    content_key: str
    confidence: float
    origin: FactOrigin
    seq: int  # storage order: older facts lose ties


@dataclass(frozen=True, slots=True)
class NewFact:
    index: int  # position in the model's newFacts
    content: str
    key: str
    category: str
    confidence: float
    source_error: str | None
    #: Event time the model found (microseconds), or None for the extraction's own.
    valid_from: int | None = None
    valid_to: int | None = None


@dataclass(slots=True)
class UpdatePlan:
    profile: dict[str, str] = field(default_factory=dict)
    new: list[NewFact] = field(default_factory=list)
    #: (old fact id, index of the new fact or the id of an active duplicate, reason)
    superseded: list[tuple[str, int | str, str]] = field(default_factory=list)
    removed: list[tuple[str, str]] = field(default_factory=list)
    evicted: list[str] = field(default_factory=list)
    notes: list[str] = field(default_factory=list)

    @property
    def empty(self) -> bool:
        return not (self.profile or self.new or self.superseded or self.removed or self.evicted)

    def counts(self) -> dict[str, int]:
        return {
            "profile_sections": len(self.profile),
            "added": len(self.new),
            "superseded": len(self.superseded),
            "removed": len(self.removed),
            "evicted": len(self.evicted),
        }


def plan_update(
    active: Sequence[ActiveFact],
    update: ProposedUpdate,
    *,
    scrub: Callable[[str], str],
    mentions_upload: Callable[[str], bool] = lambda _: False,
    threshold: float = DEFAULT_THRESHOLD,
    max_facts: int = DEFAULT_MAX_FACTS,
    near_duplicates: Mapping[int, str] | None = None,
) -> UpdatePlan:
    """Plan the changes ``update`` makes to the ``active`` facts.

    ``near_duplicates`` maps a new fact's index to the id of an active fact the caller
    judged to say the same thing (by embedding similarity).
    """
    plan = UpdatePlan()
    for section, text in sorted(update.profile.items()):
        cleaned = scrub(text)
        if cleaned:
            plan.profile[section] = cleaned
        else:
            plan.notes.append(f"profile {section}: only upload mentions, not applied")

    by_alias = {f.alias: f for f in active}
    by_key = {f.content_key: f for f in active}
    near = dict(near_duplicates or {})
    taken: set[str] = set()  # facts already superseded or removed by this plan
    batch_keys: set[str] = set()
    for i, proposed in enumerate(update.new_facts):
        label = f"newFacts[{i}]"
        if proposed.confidence < threshold:
            plan.notes.append(f"{label}: confidence {proposed.confidence:.2f} below {threshold}")
            continue
        content = proposed.content
        if mentions_upload(content):
            plan.notes.append(f"{label}: mentions a file upload, dropped")
            continue
        key = content_key(content)
        if key in batch_keys:
            plan.notes.append(f"{label}: repeats another new fact")
            continue
        twin = by_key.get(key)
        if twin is None and i in near:
            twin = next((f for f in active if f.id == near[i]), None)
        target: int | str
        if twin is not None:
            plan.notes.append(f"{label}: already known as {twin.alias}")
            target = twin.id
        else:
            batch_keys.add(key)
            plan.new.append(
                NewFact(
                    i,
                    content,
                    key,
                    proposed.category,
                    proposed.confidence,
                    proposed.source_error,
                    _micros(proposed.valid_from),
                    _micros(proposed.valid_to),
                )
            )
            target = i
        reason = proposed.reason or "contradicted by newer information"
        for alias in proposed.supersedes:
            old = by_alias.get(alias)
            if old is None or old.id in taken or (twin is not None and old.id == twin.id):
                continue
            taken.add(old.id)
            plan.superseded.append((old.id, target, reason))

    for removal in update.removals:
        old = by_alias.get(removal.alias)
        if old is None:
            plan.notes.append(f"factsToRemove {removal.alias}: no such active fact")
            continue
        if old.id in taken:
            continue
        if old.origin is FactOrigin.MANUAL:
            plan.notes.append(
                f"factsToRemove {removal.alias}: manual facts are only removed by hand"
            )
            continue
        taken.add(old.id)
        plan.removed.append((old.id, removal.reason))

    _trim(plan, active, taken, max_facts)
    return plan


def _micros(value: datetime | None) -> int | None:
    return None if value is None else to_micros(value)


def _trim(plan: UpdatePlan, active: Sequence[ActiveFact], taken: set[str], max_facts: int) -> None:
    """Keep at most ``max_facts`` active: by confidence, then the older first. A new fact
    that does not make the cut takes its supersessions with it (the facts it would have
    replaced rejoin the pool), so the count is settled again until it holds."""
    while True:
        # (confidence, is_new, order, id or index, manual)
        pool: list[tuple[float, int, int, str | int, bool]] = [
            (f.confidence, 0, f.seq, f.id, f.origin is FactOrigin.MANUAL)
            for f in active
            if f.id not in taken
        ]
        pool += [(n.confidence, 1, n.index, n.index, False) for n in plan.new]
        if len(pool) <= max_facts:
            return
        pool.sort(key=lambda p: (-p[0], p[1], p[2]))
        room = max(0, max_facts - sum(1 for p in pool if p[4]))
        ranked = [p for p in pool if not p[4]]
        dropped = ranked[room:]
        dropped_new = {p[3] for p in dropped if p[1] == 1}
        if dropped_new:
            plan.new = [n for n in plan.new if n.index not in dropped_new]
            plan.notes.append(f"{len(dropped_new)} new fact(s) below the {max_facts}-fact cap")
            back = {old for old, target, _ in plan.superseded if target in dropped_new}
            if back:
                plan.superseded = [s for s in plan.superseded if s[0] not in back]
                taken.difference_update(back)
                continue
        plan.evicted = [str(p[3]) for p in dropped if p[1] == 0]
        return
