"""One extraction, as two transactions around a model call (sans-IO operations).

``prepare`` reads what is new on the branch since the last extraction (the newest
``max_input_tokens`` of it), the signals, and the user's current memory. The
facade then asks the model, parses the answer, and ``finish`` re-reads the active
facts under the owner's update lock, plans against them (so a concurrent update of
the same user is never overwritten), applies the plan, marks the fed messages as
seen and logs the attempt, all in one transaction. A worker that dies before
``finish`` commits leaves nothing behind; the job runs again. One that dies after
it finds nothing new on the re-run, so nothing is applied twice.
"""

from __future__ import annotations

from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, field, replace

from memstrata import conversation as conv_ops
from memstrata.longterm import branchfacts, store, updates
from memstrata.longterm.apply import UpdatePlan, plan_update
from memstrata.longterm.capture import detect_signals, filter_turns
from memstrata.longterm.model import (
    Fact,
    FactSource,
    MemoryState,
    ProfileSection,
    PromptFact,
    ProposedUpdate,
    Signal,
    Turn,
)
from memstrata.runtime import Runtime
from memstrata.storage import tenancy
from memstrata.storage.plan import Op
from memstrata.storage.records import to_message, to_micros
from memstrata.types import Scope

__all__ = [
    "ExtractionResult",
    "Prepared",
    "Tally",
    "finish",
    "memory_state",
    "prepare",
    "recent_signals",
]


@dataclass(frozen=True, slots=True)
class ExtractionResult:
    """What one extraction did. ``outcome``: ``applied`` (the model answered and its
    answer was applied, possibly changing nothing), ``empty`` (nothing new to read) or
    ``waiting`` (a queued extraction found user words but no assistant reply yet: as
    DeerFlow, it waits for the reply; nothing is marked as read)."""

    outcome: str
    counts: dict[str, int]
    notes: tuple[str, ...]
    llm_calls: int
    prompt_tokens: int
    completion_tokens: int

    def to_dict(self) -> dict[str, object]:
        return {
            "outcome": self.outcome,
            "counts": dict(self.counts),
            "notes": list(self.notes),
            "llm_calls": self.llm_calls,
            "prompt_tokens": self.prompt_tokens,
            "completion_tokens": self.completion_tokens,
        }


@dataclass(frozen=True, slots=True)
class Prepared:
    conversation_id: str
    leaf_id: str | None
    turns: tuple[Turn, ...]  # fed to the model, oldest first
    read_ids: tuple[str, ...]  # every message read (marked seen once the update lands)
    signals: frozenset[Signal]
    facts: tuple[tuple[Fact, int], ...]
    profile: tuple[ProfileSection, ...]

    @property
    def aliases(self) -> dict[str, str]:
        """Prompt alias -> fact id (``f1`` is the oldest active fact)."""
        return {a.alias: a.id for a in store.as_active(self.facts)}


def memory_state(prepared: Prepared) -> MemoryState:
    actives = store.as_active(prepared.facts)
    return MemoryState(
        profile={p.name: p.summary for p in prepared.profile if p.summary},
        facts=tuple(
            PromptFact(
                a.alias,
                f.content,
                f.category,
                f.confidence,
                manual=f.origin.value == "manual",
                source_error=f.source_error,
            )
            for a, (f, _) in zip(actives, prepared.facts, strict=True)
        ),
    )


def prepare(
    rt: Runtime,
    scope: Scope,
    conversation_id: str,
    leaf_id: str | None,
    flags: Mapping[str, bool],
    *,
    max_input_tokens: int,
) -> Op[Prepared]:
    """What to extract from: the branch's unseen messages within the input budget."""
    conv = yield from conv_ops.get_conversation(scope, conversation_id)
    leaf = leaf_id or conv.active_leaf_id
    facts, profile = yield from store.current_state(scope)
    if leaf is None:
        return Prepared(conversation_id, None, (), (), frozenset(), tuple(facts), tuple(profile))
    row = yield from conv_ops.get_message(scope, conversation_id, leaf)
    # Newest first, the messages inside the budget and the one that crosses it.
    rows = yield from conv_ops.branch_chunk(
        conversation_id, row.id, row.depth + 1, max(0, row.branch_tokens - max_input_tokens)
    )
    window = [to_message(r) for r in rows]
    seen = yield from updates.seen_among(conversation_id, [m.id for m in window])
    fresh = []
    for m in window:  # stop at the watermark: what lies before it was extracted already
        if m.id in seen:
            break
        fresh.append(m)
    fresh.reverse()
    turns = filter_turns(fresh)
    signals = detect_signals(turns) | {Signal(k) for k, v in flags.items() if v and k in _SIGNALS}
    return Prepared(
        conversation_id,
        leaf,
        tuple(turns),
        tuple(m.id for m in fresh),
        frozenset(signals),
        tuple(facts),
        tuple(profile),
    )


_SIGNALS = {s.value for s in Signal}


@dataclass(slots=True)
class Tally:
    """What one update's model calls cost and returned (for the update log)."""

    calls: int = 0
    prompt_tokens: int = 0
    completion_tokens: int = 0
    raws: list[str] = field(default_factory=list)

    def record(
        self,
        outcome: str,
        conversation_id: str,
        job_id: str | None,
        signals: frozenset[Signal],
        *,
        notes: tuple[str, ...] = (),
        error: str | None = None,
    ) -> updates.ExtractionRecord:
        raw = "\n\n----- next answer -----\n\n".join(self.raws) if self.raws else None
        return updates.ExtractionRecord(
            outcome,
            conversation_id,
            job_id,
            tuple(sorted(s.value for s in signals)),
            self.calls,
            self.prompt_tokens,
            self.completion_tokens,
            {},
            notes,
            raw_output=raw if outcome == "failed" else None,
            error=error,
        )

    def result(
        self, outcome: str, counts: dict[str, int], notes: tuple[str, ...]
    ) -> ExtractionResult:
        return ExtractionResult(
            outcome, counts, notes, self.calls, self.prompt_tokens, self.completion_tokens
        )


def recent_signals(
    scope: Scope, conversation_id: str, leaf_id: str | None
) -> Op[tuple[str | None, frozenset[Signal]]]:
    """The leaf (default: the active one) and the signals of the last captured turns."""
    conv = yield from conv_ops.get_conversation(scope, conversation_id)
    leaf = leaf_id or conv.active_leaf_id
    if leaf is None:
        return None, frozenset()
    row = yield from conv_ops.get_message(scope, conversation_id, leaf)
    rows = yield from conv_ops.branch_chunk(conversation_id, row.id, 24)
    turns = filter_turns([to_message(r) for r in reversed(rows)])
    return leaf, detect_signals(turns)


def finish(
    rt: Runtime,
    scope: Scope,
    prepared: Prepared,
    update: ProposedUpdate | None,
    record: updates.ExtractionRecord,
    *,
    scrub: Callable[[str], str],
    mentions_upload: Callable[[str], bool],
    threshold: float,
    max_facts: int,
    near_duplicates: Mapping[int, str] | None = None,
    branch_withdraw: bool = False,
) -> Op[UpdatePlan]:
    """Apply ``update`` (None: nothing to apply) and log the attempt, atomically.

    With ``branch_withdraw``, new facts drawn from a branch that is no longer the active
    one (it was left while the model ran) are withdrawn at once (see ``branchfacts``).

    The conversation is held (between the user row and the owner's memory row, the
    lock order of every write) so a delete racing the extraction leaves no fact drawn
    from it: a conversation deleted meanwhile is NotFound, and nothing is applied."""
    yield from tenancy.ensure_user(scope.tenant, scope.user, rt.clock())
    yield from conv_ops.hold_conversation(scope, prepared.conversation_id)
    yield from store.lock_owner(rt, scope)
    plan = UpdatePlan()
    if update is not None:
        facts = yield from store.active_facts(scope)
        # Aliases were handed out at prepare time: they keep naming those facts while they
        # are still active. Facts that became active since (a concurrent update) count
        # for duplicates and the cap under an alias the model never saw.
        now_active = {a.id: a for a in store.as_active(facts)}
        actives = [a for a in store.as_active(prepared.facts) if a.id in now_active]
        known = {a.id for a in actives}
        actives += [replace(a, alias=f"+{a.id}") for a in now_active.values() if a.id not in known]
        plan = plan_update(
            actives,
            update,
            scrub=scrub,
            mentions_upload=mentions_upload,
            threshold=threshold,
            max_facts=max_facts,
            near_duplicates=near_duplicates,
        )
        sources = _sources(prepared)
        yield from store.apply_plan(
            rt,
            scope,
            prepared.conversation_id,
            plan,
            sources,
            event_at=_event_at(prepared, sources),
        )
        if branch_withdraw and plan.new:
            yield from branchfacts.reconcile(rt, prepared.conversation_id)
    yield from updates.mark_seen(prepared.conversation_id, prepared.read_ids)
    counts = plan.counts()
    yield from updates.record_update(
        rt,
        scope,
        updates.ExtractionRecord(
            outcome=record.outcome,
            conversation_id=record.conversation_id,
            job_id=record.job_id,
            signals=record.signals,
            llm_calls=record.llm_calls,
            prompt_tokens=record.prompt_tokens,
            completion_tokens=record.completion_tokens,
            counts=counts,
            notes=tuple(record.notes) + tuple(plan.notes),
            raw_output=record.raw_output,
            error=record.error,
        ),
    )
    return plan


def _sources(prepared: Prepared) -> Sequence[FactSource]:
    users = [t.message_id for t in prepared.turns if t.role == "user"]
    ids = users[-store.MAX_SOURCES :] or [t.message_id for t in prepared.turns][-1:]
    return [FactSource(prepared.conversation_id, mid) for mid in ids]


def _event_at(prepared: Prepared, sources: Sequence[FactSource]) -> int | None:
    """When what this extraction learned happened: the earliest ``occurred_at`` of its
    source messages (an import's or a backfill's own times, never the time of the run)."""
    ids = {s.message_id for s in sources}
    times = [t.occurred_at for t in prepared.turns if t.message_id in ids and t.occurred_at]
    return to_micros(min(times)) if times else None
