"""The reports on one owner's long-term memory: its health, and a consolidation planned,
applied or reverted."""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from memstrata.encoding import to_json

__all__ = [
    "Consolidation",
    "ConsolidationChange",
    "ConsolidationRevert",
    "FactBrief",
    "HealthCheck",
    "HealthExample",
    "MemoryHealth",
    "MemorySizes",
]


@dataclass(frozen=True, slots=True)
class FactBrief:
    """A fact as a report shows it: id, category and the start of its content."""

    id: str
    category: str
    content: str

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)


@dataclass(frozen=True, slots=True)
class HealthExample:
    """One finding: the facts concerned and why they were picked."""

    facts: tuple[FactBrief, ...]
    note: str

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)


@dataclass(frozen=True, slots=True)
class HealthCheck:
    """One check: how many findings (None: unknown), and a few of them."""

    count: int | None
    examples: tuple[HealthExample, ...]
    known: bool = True

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)


@dataclass(frozen=True, slots=True)
class MemorySizes:
    active: int
    superseded: int
    removed: int
    evicted: int
    profile_sections: int
    fact_tokens: int
    profile_tokens: int

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)


@dataclass(frozen=True, slots=True)
class MemoryHealth:
    """The health report of one owner's long-term memory."""

    generated_at: datetime
    stale_days: int
    analysed: int
    truncated: bool
    semantic: bool
    usage_known: bool
    sizes: MemorySizes
    duplicates: HealthCheck
    contradictions: HealthCheck
    stale: HealthCheck
    unused: HealthCheck

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)


@dataclass(frozen=True, slots=True)
class ConsolidationChange:
    """One change: ``superseded`` facts are superseded by the target — the fact
    ``target_id`` (an existing fact, or the new one once applied) whose content is
    ``content``. ``new_fact``: the target is new merged content."""

    kind: str  # "merge" (near duplicates) or "supersede" (a contradiction settled)
    superseded: tuple[FactBrief, ...]
    target_id: str | None
    content: str
    category: str
    new_fact: bool
    reason: str

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)


@dataclass(frozen=True, slots=True)
class Consolidation:
    """A planned (``applied`` false) or applied consolidation: its id (the marker in the
    touched facts' ``reason``), how it was planned, its changes and notes."""

    id: str
    mode: str  # "llm" or "deterministic"
    dry_run: bool
    applied: bool
    changes: tuple[ConsolidationChange, ...]
    notes: tuple[str, ...]

    @property
    def superseded_count(self) -> int:
        return sum(len(c.superseded) for c in self.changes)

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)


@dataclass(frozen=True, slots=True)
class ConsolidationRevert:
    """What reverting a consolidation did: facts made active again, and merged facts it
    had created that were superseded by a restored one."""

    consolidation_id: str
    restored: tuple[str, ...]
    retired: tuple[str, ...]

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)
