"""Memory health: what a user's long-term memory holds, and what looks wrong in it.

A report names near-duplicate facts, contradiction candidates, stale facts and unused
facts, with counts and a few examples each (ids and short content of the owner's own
facts only), and the memory's sizes. The analysis is pure and deterministic
(:func:`analyse`); :func:`health_input` reads what it needs in one read transaction.

The rules (documented in docs/time-and-provenance.md):

* **near duplicates** — two active facts whose word sets (case-folded, a few filler
  words left out) have a Jaccard similarity of at least :data:`DUPLICATE_JACCARD`, or,
  when vectors are given (the long-term embedder), a cosine similarity at least the
  kit's near-duplicate threshold. Pairs join into groups (connected components).
* **contradiction candidates** — two active facts of the same category, not near
  duplicates, whose first significant word is the same (the subject or its verb:
  "lives", "prefers", "favourite") and that share at least half the words of the
  shorter one, while each says something the other does not ("lives Berlin" and
  "lives Paris").
* **stale** — active facts older than ``stale_days`` that were never reinforced (no
  history event beyond their creation, and no other fact superseded by or merged into
  them) and, when usage is known, never injected into a recorded context.
* **unused** — active facts never injected into a recorded context; only when the
  memory knows usage (``core.fact_usage``), else ``usage_known`` is false and the count
  is None (never a silent "all unused").
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime, timedelta

from memstrata.domain.memory import FactBrief, HealthCheck, HealthExample, MemoryHealth, MemorySizes
from memstrata.longterm.model import Fact, FactStatus, ProfileSection
from memstrata.longterm.rows import OWNER, owner
from memstrata.longterm.similar import cosines
from memstrata.longterm.store import active_facts, get_profile
from memstrata.storage.plan import Op, Query
from memstrata.storage.sql import placeholders
from memstrata.types import Scope

__all__ = [
    "DUPLICATE_JACCARD",
    "MAX_ANALYSED",
    "FactBrief",
    "HealthCheck",
    "HealthExample",
    "HealthInput",
    "MemoryHealth",
    "MemorySizes",
    "UsageCounter",
    "analyse",
    "brief",
    "contradiction_pairs",
    "duplicate_groups",
    "health_input",
    "words",
]

#: Word-set similarity at or above which two facts say the same thing.
DUPLICATE_JACCARD = 0.8
#: Active facts analysed at most (oldest first); the report says when more exist.
MAX_ANALYSED = 1000
_SHORT = 120
_FILLER = frozenset(
    [
        "a",
        "an",
        "the",
        "is",
        "are",
        "am",
        "was",
        "were",
        "be",
        "been",
        "i",
        "i'm",
        "im",
        "my",
        "me",
        "user",
        "user's",
        "users",
        "s",
        "of",
        "to",
        "in",
        "at",
        "on",
        "for",
        "and",
        "or",
        "with",
        "as",
        "by",
        "it",
        "its",
        "this",
        "that",
        "has",
        "have",
        "had",
        "does",
        "do",
    ]
)
_WORD = re.compile(r"[\w']+")

#: How a memory counts the recorded contexts each fact entered (prov's
#: ``fact_use_counts``), set on the core when context records exist.
UsageCounter = Callable[[Scope, Sequence[str]], Op[dict[str, int]]]


@dataclass(frozen=True, slots=True)
class HealthInput:
    """What the analysis reads: active facts (oldest first, with their storage order),
    fact counts by status, the reinforced fact ids, the profile, and usage counts (None:
    unknown)."""

    facts: tuple[tuple[Fact, int], ...]
    status_counts: Mapping[str, int]
    reinforced: frozenset[str]
    profile: tuple[ProfileSection, ...]
    usage: Mapping[str, int] | None


# -- reading ------------------------------------------------------------------------------


def health_input(scope: Scope, usage: UsageCounter | None = None) -> Op[HealthInput]:
    """Everything :func:`analyse` needs, read in the caller's (read) transaction."""
    rows = yield Query(
        f"SELECT status, COUNT(*) FROM facts WHERE {OWNER} GROUP BY status", owner(scope)
    )
    counts = {str(status): int(n) for status, n in rows}
    facts = (yield from active_facts(scope))[:MAX_ANALYSED]
    ids = [f.id for f, _ in facts]
    reinforced: set[str] = set()
    if ids:
        marks = placeholders(len(ids))
        rows = yield Query(
            "SELECT fact_id, related_id FROM fact_events WHERE tenant_id = ? AND user_id = ? "
            f"AND ((fact_id IN ({marks}) AND event <> 'created') OR related_id IN ({marks}))",
            (scope.tenant, scope.user, *ids, *ids),
        )
        wanted = set(ids)
        for fid, related in rows:
            # A later event of the fact itself, or another fact folded into it.
            reinforced.update(x for x in (fid, related) if x in wanted)
    profile = yield from get_profile(scope)
    used: Mapping[str, int] | None = None
    if usage is not None:
        used = (yield from usage(scope, ids)) if ids else {}
    return HealthInput(tuple(facts), counts, frozenset(reinforced), tuple(profile), used)


# -- the pure analysis ----------------------------------------------------------------------


def words(content: str) -> tuple[str, ...]:
    """The significant words of a fact, in order (case-folded, filler left out)."""
    return tuple(w for w in _WORD.findall(content.casefold()) if w not in _FILLER)


def brief(fact: Fact) -> FactBrief:
    text = fact.content if len(fact.content) <= _SHORT else fact.content[: _SHORT - 1] + "…"
    return FactBrief(fact.id, fact.category, text)


def _jaccard(a: frozenset[str], b: frozenset[str]) -> float:
    if not a and not b:
        return 1.0
    return len(a & b) / len(a | b)


def _cosine_pairs(vectors: Sequence[Sequence[float]], threshold: float) -> set[tuple[int, int]]:
    import numpy as np  # only when an embedder is in use

    idx = np.argwhere(np.triu(cosines(vectors, vectors), k=1) >= threshold)
    return {(int(i), int(j)) for i, j in idx.tolist()}


def duplicate_groups(
    facts: Sequence[Fact],
    *,
    vectors: Sequence[Sequence[float]] | None = None,
    similarity: float = 0.92,
) -> list[list[int]]:
    """Groups (indexes into ``facts``, each ascending; groups by their first index) of
    near-duplicate facts."""
    sets = [frozenset(words(f.content)) for f in facts]
    parent = list(range(len(facts)))

    def root(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    pairs = {
        (i, j)
        for i in range(len(facts))
        for j in range(i + 1, len(facts))
        if _jaccard(sets[i], sets[j]) >= DUPLICATE_JACCARD
    }
    if vectors is not None and len(vectors) == len(facts) and len(facts) > 1:
        pairs |= _cosine_pairs(vectors, similarity)
    for i, j in sorted(pairs):
        a, b = root(i), root(j)
        if a != b:
            parent[max(a, b)] = min(a, b)
    groups: dict[int, list[int]] = {}
    for i in range(len(facts)):
        groups.setdefault(root(i), []).append(i)
    return [g for _, g in sorted(groups.items()) if len(g) > 1]


def contradiction_pairs(
    facts: Sequence[Fact], duplicates: Sequence[Sequence[int]] = ()
) -> list[tuple[int, int, str]]:
    """Pairs (i, j, the shared subject word) of contradiction candidates, i < j."""
    in_group = {i: n for n, g in enumerate(duplicates) for i in g}
    seqs = [words(f.content) for f in facts]
    sets = [frozenset(s) for s in seqs]
    out: list[tuple[int, int, str]] = []
    for i in range(len(facts)):
        for j in range(i + 1, len(facts)):
            a, b = facts[i], facts[j]
            if a.category != b.category or not seqs[i] or not seqs[j]:
                continue
            if i in in_group and in_group[i] == in_group.get(j):
                continue
            if seqs[i][0] != seqs[j][0]:
                continue
            shared = sets[i] & sets[j]
            shorter = min(len(sets[i]), len(sets[j]))
            if sets[i] - sets[j] and sets[j] - sets[i] and len(shared) * 2 >= shorter:
                out.append((i, j, seqs[i][0]))
    return out


def analyse(
    data: HealthInput,
    *,
    now: datetime,
    stale_days: int,
    count_tokens: Callable[[str], int],
    examples: int = 5,
    vectors: Sequence[Sequence[float]] | None = None,
    similarity: float = 0.92,
) -> MemoryHealth:
    """The report for ``data`` (pure)."""
    facts = [f for f, _ in data.facts]
    groups = duplicate_groups(facts, vectors=vectors, similarity=similarity)
    dup_examples = tuple(
        HealthExample(
            tuple(brief(facts[i]) for i in g), f"{len(g)} facts say nearly the same thing"
        )
        for g in groups[:examples]
    )
    pairs = contradiction_pairs(facts, groups)
    con_examples = tuple(
        HealthExample(
            (brief(facts[i]), brief(facts[j])),
            f"same category ({facts[i].category}) and subject ({word!r}), different content",
        )
        for i, j, word in pairs[:examples]
    )
    usage = data.usage
    cutoff = now - timedelta(days=stale_days)
    stale = [
        f
        for f in facts
        if f.created_at < cutoff
        and f.id not in data.reinforced
        and (usage is None or not usage.get(f.id))
    ]
    stale_note = f"older than {stale_days} days, never reinforced" + (
        ", never in a recorded context" if usage is not None else ""
    )
    unused: HealthCheck
    if usage is None:
        unused = HealthCheck(None, (), known=False)
    else:
        never = [f for f in facts if not usage.get(f.id)]
        unused = HealthCheck(
            len(never),
            tuple(
                HealthExample((brief(f),), "never in a recorded context") for f in never[:examples]
            ),
        )
    counts = data.status_counts
    written = [p for p in data.profile if p.summary]
    sizes = MemorySizes(
        active=counts.get(FactStatus.ACTIVE.value, 0),
        superseded=counts.get(FactStatus.SUPERSEDED.value, 0),
        removed=counts.get(FactStatus.REMOVED.value, 0),
        evicted=counts.get(FactStatus.EVICTED.value, 0),
        profile_sections=len(written),
        fact_tokens=sum(count_tokens(f.content) for f in facts),
        profile_tokens=sum(count_tokens(p.summary) for p in written),
    )
    return MemoryHealth(
        generated_at=now,
        stale_days=stale_days,
        analysed=len(facts),
        truncated=sizes.active > len(facts),
        semantic=vectors is not None,
        usage_known=usage is not None,
        sizes=sizes,
        duplicates=HealthCheck(len(groups), dup_examples),
        contradictions=HealthCheck(len(pairs), con_examples),
        stale=HealthCheck(
            len(stale),
            tuple(HealthExample((brief(f),), stale_note) for f in stale[:examples]),
        ),
        unused=unused,
    )
