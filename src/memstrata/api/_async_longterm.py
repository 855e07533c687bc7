"""Long-term memory facades: ``mem.facts`` (the fact store) and ``mem.longterm`` (capture,
extraction, profile, import/export). ``_sync_longterm.py`` is generated from this file
by ``scripts/unasync.py``.

An extraction is two transactions around the model call (see
:mod:`memstrata.longterm.extract`): no database lock is held while a model thinks.
"""

from __future__ import annotations

import builtins
import logging
from collections.abc import Mapping
from dataclasses import replace
from datetime import UTC, datetime
from typing import Any

from memstrata.api._async_base import AsyncSubAPI
from memstrata.api._async_receipts import LOCAL_ACTOR, settle
from memstrata.errors import ConfigurationError, InvalidInput
from memstrata.ids import parse_id
from memstrata.jobs import ops as jobs_ops
from memstrata.jobs.ops import Job
from memstrata.llm import LLM
from memstrata.longterm import clocks, deerflow, portable, similar, store, updates
from memstrata.longterm import extract as ex
from memstrata.longterm.model import (
    ExtractionFailed,
    Fact,
    FactEvent,
    FactOrigin,
    FactStatus,
    ProfileSection,
    ProposedUpdate,
    UpdateParseError,
)
from memstrata.longterm.parse import parse_update
from memstrata.longterm.prompt import build_messages, repair_messages
from memstrata.longterm.scrub import mentions_upload, scrub_uploads
from memstrata.longterm.service import EXTRACT_JOB, LongTermKit, job_key
from memstrata.receipts import Receipt
from memstrata.receipts import ops as receipt_ops
from memstrata.types import Page, Scope
from memstrata.usage import attributed
from memstrata.validation import checked_scope as _scope

__all__ = ["AsyncFacts", "AsyncLongTerm"]

log = logging.getLogger("memstrata.longterm")

_STATUSES = {s.value: s for s in FactStatus}


def _status(value: str | None) -> FactStatus | None:
    if value is None or value == "all":
        return None
    if value not in _STATUSES:
        raise InvalidInput(f"status must be all or one of {', '.join(_STATUSES)}", field="status")
    return _STATUSES[value]


class AsyncFacts(AsyncSubAPI):
    """A user's long-term facts: read, add, edit, delete, and the history of each."""

    async def list(
        self,
        scope: Scope,
        *,
        status: str | None = "active",
        category: str | None = None,
        limit: int | None = None,
        cursor: str | None = None,
        as_of: datetime | str | None = None,
        known_at: datetime | str | None = None,
    ) -> Page[Fact]:
        """Newest first. ``status``: ``active`` (default: the facts true now, valid now
        and not superseded), ``superseded``, ``removed``, ``evicted`` or ``all``.

        ``as_of`` (a ``datetime`` or ISO 8601 text): the facts that were true then, as
        memstrata knew them then; ``known_at`` asks as known at another time (pass now
        for what is known now about ``as_of``). Both read active facts only; a bad time
        is :class:`~memstrata.errors.InvalidInput`."""
        s, st, rt = _scope(scope), _status(status), self._core.rt
        at = clocks.as_of(as_of, known_at)
        return await self._read(
            store.list_facts,
            rt,
            s,
            status=st,
            category=category,
            limit=limit,
            cursor=cursor,
            at=at,
        )

    async def add(
        self,
        scope: Scope,
        content: str,
        *,
        category: str = "context",
        confidence: float = 1.0,
        source_error: str | None = None,
        id: str | None = None,
    ) -> Fact:
        """Add a fact by hand (409 when an active fact already says the same).

        ``id``: the fact's id (a UUID) when the caller keeps its own key, as a key-value
        store does. As for messages, adding the same id again with the same content,
        category, confidence and source error returns the stored fact and changes
        nothing (a safe retry); anything else already under that id is a
        :class:`~memstrata.errors.Conflict` (409).
        """
        s, rt = _scope(scope), self._core.rt
        data = store.check_fact_input(content, category, confidence, source_error)
        fid = None if id is None else parse_id(id, field="id")
        return await self._write(store.add_fact, rt, s, data, FactOrigin.MANUAL, fact_id=fid)

    async def get(self, scope: Scope, fact_id: str) -> Fact:
        s = _scope(scope)
        return await self._read(store.get_fact, s, fact_id)

    async def edit(self, scope: Scope, fact_id: str, **changes: Any) -> Fact:
        """Change ``content``, ``category``, ``confidence`` or ``source_error`` of an active
        fact; the previous version stays in its history."""
        s, rt = _scope(scope), self._core.rt
        if not changes:
            raise InvalidInput("nothing to change", field="content")
        return await self._write(store.edit_fact, rt, s, fact_id, dict(changes))

    async def delete(self, scope: Scope, fact_id: str, *, actor: str | None = None) -> Receipt:
        """Erase a fact and its history (superseded, manual or imported alike); returns the
        deletion's receipt."""
        s, rt = _scope(scope), self._core.rt
        deletion = await self._write(
            receipt_ops.delete_fact, rt, s, fact_id, rt.make_id(), actor or LOCAL_ACTOR
        )
        return await settle(self._core, deletion)

    async def history(self, scope: Scope, fact_id: str) -> builtins.list[FactEvent]:
        """What happened to the fact and to the facts it replaced or was replaced by."""
        s = _scope(scope)
        return await self._read(store.fact_history, s, fact_id)


class AsyncLongTerm(AsyncSubAPI):
    """Capture, extraction, the profile, and import/export of long-term memory."""

    @property
    def kit(self) -> LongTermKit:
        """Settings, the LLM and the context tiers of long-term memory (shared)."""
        return self._core.longterm

    async def observe(
        self, scope: Scope, conversation_id: str, *, leaf_id: str | None = None
    ) -> Job:
        """Queue (or push back) extraction of the branch ending at ``leaf_id`` (default:
        the active leaf), with the correction and reinforcement signals of its last
        captured turns. Returns the (merged) job."""
        s, kit = _scope(scope), self.kit
        # Checked like a message id before anything is read or queued (a malformed id is 422).
        leaf_id = None if leaf_id is None else parse_id(leaf_id, field="leaf_id")

        def op() -> Any:
            leaf, signals = yield from ex.recent_signals(s, conversation_id, leaf_id)
            return (yield from kit.enqueue(s, conversation_id, leaf, signals))

        job: Job = await self._write(op)
        await self._core.ajob_queued()
        return job

    @attributed
    async def flush(
        self,
        scope: Scope,
        conversation_id: str,
        *,
        leaf_id: str | None = None,
        flags: Mapping[str, bool] | None = None,
        job_id: str | None = None,
        wait_for_reply: bool = False,
    ) -> ex.ExtractionResult:
        """Extract now, in this call, from what is new on the branch (no debounce).

        With ``wait_for_reply`` (how the queued job calls it) new user words with no
        assistant reply among them are left for later (outcome ``waiting``), as DeerFlow
        extracts only a conversation holding both; a direct flush reads them at once.

        The signal flags of the conversation's queued job are included. Raises
        :class:`~memstrata.errors.ConfigurationError` when no LLM is configured and
        :class:`~memstrata.longterm.model.ExtractionFailed` when the model's answers
        stay unusable (each kept in the update log).
        """
        s, kit, rt = _scope(scope), self.kit, self._core.rt
        llm = kit.llm
        if llm is None:
            raise ConfigurationError(kit.blocked() or "no LLM configured")
        merged = dict(flags or {})
        if job_id is None:
            merged.update(await self._queued_flags(conversation_id))
        prep = await self._read(
            ex.prepare,
            rt,
            s,
            conversation_id,
            leaf_id,
            merged,
            max_input_tokens=kit.max_input_tokens,
        )
        if wait_for_reply and prep.turns and all(t.role == "user" for t in prep.turns):
            return ex.ExtractionResult("waiting", {}, ("waiting for an assistant reply",), 0, 0, 0)
        if not prep.turns:
            tally = ex.Tally()
            await self._finish(
                s, prep, None, tally.record("empty", conversation_id, job_id, prep.signals)
            )
            return tally.result("empty", {}, ())
        messages = build_messages(
            ex.memory_state(prep), prep.turns, prep.signals, today=datetime.now(UTC).date()
        )
        tally = ex.Tally()
        try:
            update = await self._ask(llm, messages, prep, tally)
        except Exception as exc:  # logged; then the caller (or the job's retries) decides
            error = f"{type(exc).__name__}: {exc}"
            record = tally.record("failed", conversation_id, job_id, prep.signals, error=error)
            await self._write(updates.record_update, rt, s, record)
            raise
        update = self._redacted(update)
        near = await self._near_duplicates(prep, update)
        record = tally.record("applied", conversation_id, job_id, prep.signals, notes=update.notes)
        plan = await self._finish(s, prep, update, record, near)
        return tally.result("applied", plan.counts(), tuple(update.notes) + tuple(plan.notes))

    def _redacted(self, update: ProposedUpdate) -> ProposedUpdate:
        """What is stored never carries what redaction hides from the model."""
        red = self._core.redactor
        if red is None:
            return update
        facts = tuple(
            replace(f, content=red(f.content), source_error=f.source_error and red(f.source_error))
            for f in update.new_facts
        )
        profile = {k: red(v) for k, v in update.profile.items()}
        return replace(update, new_facts=facts, profile=profile)

    async def _ask(
        self, llm: LLM, messages: builtins.list[dict[str, str]], prep: ex.Prepared, tally: ex.Tally
    ) -> ProposedUpdate:
        """Ask the model, and ask again (with the problem stated) while its answer is
        unusable, up to ``max_llm_calls`` calls in all."""
        count = self._core.rt.tokenizer.count_text
        problem = ""
        while tally.calls < self.kit.max_llm_calls:
            tally.calls += 1
            tally.prompt_tokens += sum(count(m["content"]) + 4 for m in messages)
            raw = await llm.acomplete(messages, model=self.kit.model, purpose="longterm")
            raw = raw if isinstance(raw, str) else ""
            tally.completion_tokens += count(raw)
            try:
                return parse_update(raw, prep.aliases.keys())
            except UpdateParseError as exc:
                tally.raws.append(raw)
                problem = str(exc)
                messages = repair_messages(messages, raw, problem)
        raise ExtractionFailed(
            f"the model's answer was unusable after {tally.calls} call(s): {problem}"
        )

    async def _finish(
        self,
        scope: Scope,
        prep: ex.Prepared,
        update: ProposedUpdate | None,
        record: updates.ExtractionRecord,
        near: Mapping[int, str] | None = None,
    ) -> Any:
        rt, kit = self._core.rt, self.kit
        return await self._write(
            ex.finish,
            rt,
            scope,
            prep,
            update,
            record,
            scrub=scrub_uploads,
            mentions_upload=mentions_upload,
            threshold=kit.threshold,
            max_facts=kit.max_facts,
            near_duplicates=near,
            branch_withdraw=kit.branch_withdraw,
        )

    async def _queued_flags(self, conversation_id: str) -> dict[str, bool]:
        key = job_key(conversation_id)
        job = await self._read(jobs_ops.queued_by_key, EXTRACT_JOB, key)
        return {} if job is None else dict(job.flags)

    async def _near_duplicates(self, prep: ex.Prepared, update: ProposedUpdate) -> dict[int, str]:
        """New facts that say what an active fact says, by embedding similarity."""
        kit = self.kit
        emb = kit.embedder
        if emb is None or kit.near_duplicate > 1:
            return {}
        old = [f for f, _ in prep.facts]
        todo = similar.check(update.new_facts, old, prep.aliases, threshold=kit.threshold)
        if todo is None:
            return {}
        try:
            vectors = await emb.aembed(todo.texts)
        except Exception:  # exact-key dedupe still holds; a failing embedder must not lose facts
            log.warning("near-duplicate check skipped: the embedder failed", exc_info=True)
            return {}
        return todo.matches(vectors, kit.near_duplicate)

    async def profile(
        self,
        scope: Scope,
        *,
        as_of: datetime | str | None = None,
        known_at: datetime | str | None = None,
    ) -> list[ProfileSection]:
        """The six profile sections (an unwritten one has an empty summary); with
        ``as_of``/``known_at`` (as for :meth:`list`), each section as it held then, as
        known then: a section rewritten since reads in its earlier version."""
        s = _scope(scope)
        at = clocks.as_of(as_of, known_at)
        if at is None:
            return await self._read(store.get_profile, s)
        return await self._read(store.get_profile, s, at.known_at, at.valid_at)

    async def updates(self, scope: Scope, limit: int = 50) -> list[dict[str, Any]]:
        """The extraction log, newest first: outcome, token usage, counts, notes, and the
        raw model output of failed attempts."""
        s = _scope(scope)
        return await self._read(updates.list_updates, s, limit)

    async def status(self) -> dict[str, Any]:
        """Whether extraction can run here, and how many extraction jobs wait or died."""
        kinds = (EXTRACT_JOB,)
        counts = await self._read(jobs_ops.counts_of, kinds)
        reason = self.kit.blocked()
        return {
            "extraction": "disabled" if reason else "enabled",
            "reason": reason,
            "capture": self.kit.capture,
            "capture_mode": self.kit.capture_mode,
            "jobs": counts,
        }

    async def export(self, scope: Scope, *, format: str = "deerflow") -> dict[str, Any]:
        """The user's memory as a document (``deerflow``: DeerFlow's memory.json shape).

        Facts keep their ids and ``source``; ``lastUpdated`` is when the memory last
        changed (the export time only for a memory that never changed)."""
        if format != "deerflow":
            raise InvalidInput("format must be deerflow", field="format")
        s = _scope(scope)

        def state() -> Any:
            facts, profile = yield from portable.export_state(s)
            return facts, profile, (yield from portable.last_change(s))

        facts, profile, changed = await self._read(state)
        return deerflow.to_deerflow(profile, facts, now=changed or datetime.now(UTC))

    async def import_memory(
        self, scope: Scope, document: object, *, format: str = "deerflow"
    ) -> dict[str, Any]:
        """Add a memory document's profile and facts (duplicates skipped, cap kept).

        A fact with an unusable confidence (null, missing, a string, out of range) is
        imported with the default confidence and named in ``warnings``; ids and
        ``source`` are kept."""
        if format != "deerflow":
            raise InvalidInput("format must be deerflow", field="format")
        s, rt, kit = _scope(scope), self._core.rt, self.kit
        doc = deerflow.read_deerflow(document)
        facts = [
            portable.ImportFact(
                store.check_fact_input(f.content, f.category, f.confidence, f.source_error),
                None if f.created_at is None else int(f.created_at.timestamp() * 1_000_000),
                f.id,
                None if f.source in deerflow.PLACEHOLDER_SOURCES else f.source,
            )
            for f in doc.facts
        ]
        counts = await self._write(
            portable.import_memory, rt, s, doc.profile, facts, max_facts=kit.max_facts
        )
        return {**counts, "warnings": doc.warnings}
