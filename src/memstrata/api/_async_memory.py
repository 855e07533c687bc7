"""``mem.memory``: the health of a user's long-term memory, and its consolidation.
``_sync_memory.py`` is generated from this file by ``scripts/unasync.py``.

Planning talks to the model (when one is configured) outside any transaction; applying
is one write transaction that re-checks every fact it touches (see
:mod:`memstrata.longterm.consolidate`).
"""

from __future__ import annotations

import logging
from collections.abc import Sequence
from dataclasses import replace
from datetime import UTC, datetime

from memstrata.api._async_base import AsyncSubAPI
from memstrata.errors import InvalidInput
from memstrata.ids import parse_id
from memstrata.jobs.ops import Job
from memstrata.longterm import consolidate as cons
from memstrata.longterm import consolidate_llm, health
from memstrata.longterm.model import Fact
from memstrata.longterm.store import active_facts
from memstrata.types import Scope
from memstrata.validation import checked_scope as _scope

__all__ = ["AsyncMemoryMaintenance"]

log = logging.getLogger("memstrata.longterm")

#: Facts older than this many days, never reinforced nor used, are reported stale.
DEFAULT_STALE_DAYS = 90
_MAX_EXAMPLES = 50


def _check_int(value: object, name: str, low: int, high: int) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or not low <= value <= high:
        raise InvalidInput(f"{name} must be an integer in {low}..{high}", field=name)
    return value


def _flag(value: object, name: str) -> bool:
    if not isinstance(value, bool):
        raise InvalidInput(f"{name} must be true or false", field=name)
    return value


class AsyncMemoryMaintenance(AsyncSubAPI):
    """Health reports and consolidation of one owner's long-term memory."""

    async def health(
        self,
        scope: Scope,
        *,
        stale_days: int = DEFAULT_STALE_DAYS,
        examples: int = 5,
        semantic: bool = False,
    ) -> health.MemoryHealth:
        """Counts and examples of near-duplicate, contradicting, stale and unused facts,
        and the memory's sizes (see :mod:`memstrata.longterm.health` for the rules).
        Examples name only this owner's facts. ``semantic``: near duplicates by embedding
        similarity too (long-term memory's embedder), not only by words."""
        s = _scope(scope)
        days = _check_int(stale_days, "stale_days", 0, 36500)
        n = _check_int(examples, "examples", 0, _MAX_EXAMPLES)
        data = await self._read(health.health_input, s, self._core.fact_usage)
        facts = [f for f, _ in data.facts]
        vectors = await self._vectors(facts) if _flag(semantic, "semantic") else None
        return health.analyse(
            data,
            now=datetime.now(UTC),
            stale_days=days,
            count_tokens=self._core.rt.tokenizer.count_text,
            examples=n,
            vectors=vectors,
            similarity=self._core.longterm.near_duplicate,
        )

    async def consolidate(
        self,
        scope: Scope,
        *,
        dry_run: bool = True,
        semantic: bool = False,
        consolidation_id: str | None = None,
    ) -> cons.Consolidation:
        """Plan merges and supersessions (with the model when one is configured, by
        near-duplicate merging otherwise) and return the diff; ``dry_run=False`` applies
        it, through supersession only (undo it with :meth:`revert`). ``semantic``: see
        :meth:`health`."""
        s = _scope(scope)
        _flag(dry_run, "dry_run")
        if consolidation_id is None:
            cid = self._core.rt.make_id()
        else:
            cid = parse_id(consolidation_id, field="consolidation_id")
        facts = (await self._read(active_facts, s))[: health.MAX_ANALYSED]
        mode, changes, notes = await self._plan(facts, _flag(semantic, "semantic"))
        if dry_run or not changes:
            return cons.Consolidation(cid, mode, dry_run, False, tuple(changes), tuple(notes))
        done, more = await self._write(cons.apply, self._core.rt, s, cid, changes)
        return cons.Consolidation(cid, mode, False, bool(done), tuple(done), (*notes, *more))

    @property
    def planned_by_model(self) -> bool:
        """Whether a consolidation is planned by the model (one is configured)."""
        return self._core.longterm.llm is not None

    async def schedule_consolidation(self, scope: Scope, *, semantic: bool = False) -> Job:
        """Queue an applied consolidation as a ``longterm.consolidate`` job (seen in
        ``mem.jobs``); the job's id is the consolidation's id, for :meth:`revert`."""
        s = _scope(scope)
        return await self._enqueue(
            cons.CONSOLIDATE_JOB,
            tenant=s.tenant,
            user=s.user,
            agent=s.agent,
            key=None,
            payload={"semantic": _flag(semantic, "semantic")},
            max_wait_s=0.0,
            max_attempts=3,
        )

    async def revert(self, scope: Scope, consolidation_id: str) -> cons.ConsolidationRevert:
        """Undo an applied consolidation through supersession: its superseded facts are
        active again and the merged facts it created are superseded by them; both steps
        show in ``mem.facts.history``. NotFound when it left nothing in this scope."""
        s = _scope(scope)
        cid = parse_id(consolidation_id, field="consolidation_id")
        return await self._write(cons.revert, self._core.rt, s, cid)

    # -- planning -------------------------------------------------------------------------

    async def _vectors(self, facts: Sequence[Fact]) -> list[list[float]] | None:
        """The facts' embeddings when long-term memory has an embedder, else None (word
        similarity only). A failing embedder is logged and ignored."""
        kit = self._core.longterm
        emb = kit.embedder
        if emb is None or kit.near_duplicate > 1 or len(facts) < 2:
            return None
        try:
            return [list(v) for v in await emb.aembed([f.content for f in facts])]
        except Exception:
            log.warning("memory health: the embedder failed; word similarity only", exc_info=True)
            return None

    async def _plan(
        self, facts: list[tuple[Fact, int]], semantic: bool
    ) -> tuple[str, list[cons.ConsolidationChange], list[str]]:
        kit = self._core.longterm
        vectors = await self._vectors([f for f, _ in facts]) if semantic else None
        fallback = cons.deterministic_plan(facts, vectors=vectors, similarity=kit.near_duplicate)
        llm = kit.llm
        if llm is None or len(facts) < 2:
            return "deterministic", fallback, []
        aliases = [f"f{i}" for i in range(1, len(facts) + 1)]
        hints = self._hints(facts, aliases, fallback)
        messages = consolidate_llm.build_messages([f for f, _ in facts], aliases, hints)
        notes: list[str] = []
        for _ in range(max(1, kit.max_llm_calls)):
            try:
                raw = await llm.acomplete(messages, model=kit.model, purpose="consolidation")
                proposal = consolidate_llm.parse_proposal(raw)
            except consolidate_llm.ConsolidationParseError as exc:
                notes.append(f"the model's answer was unusable: {exc}")
                continue
            except Exception as exc:  # the model is unreachable: plan without it, say so
                notes.append(f"the model failed ({type(exc).__name__}: {exc})")
                break
            changes, why = cons.validate(self._redacted(proposal), facts, aliases)
            return "llm", changes, [*notes, *why]
        notes.append("planned without the model: near duplicates merged")
        return "deterministic", fallback, notes

    def _redacted(self, proposal: cons.Proposal) -> cons.Proposal:
        """Merged content never stores what redaction hides from the model."""
        red = self._core.redactor
        if red is None:
            return proposal
        changes = tuple(
            c if c.content is None else replace(c, content=red(c.content)) for c in proposal.changes
        )
        return cons.Proposal(changes, proposal.notes)

    @staticmethod
    def _hints(
        facts: list[tuple[Fact, int]],
        aliases: list[str],
        duplicates: list[cons.ConsolidationChange],
    ) -> list[str]:
        alias = {f.id: a for a, (f, _) in zip(aliases, facts, strict=True)}
        plain = [f for f, _ in facts]
        out = [
            "near duplicates: "
            + ", ".join(alias[x] for x in (c.target_id or "", *(b.id for b in c.superseded)))
            for c in duplicates
        ]
        out += [
            f"possible contradiction: {alias[plain[i].id]} and {alias[plain[j].id]}"
            for i, j, _ in health.contradiction_pairs(plain)
        ]
        return out
