"""The extraction log of long-term memory: which messages an extraction has read, and one
record per attempt (outcome, token usage, counts, notes, the raw output of failures)."""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from typing import Any

from memstrata.longterm.rows import OWNER, owner
from memstrata.runtime import Runtime
from memstrata.sealing import seal, unseal
from memstrata.storage.plan import Exec, Op, Query, Row
from memstrata.storage.records import dump_json, from_micros
from memstrata.storage.sql import BATCH, placeholders
from memstrata.types import Scope

__all__ = [
    "UPDATE_TEXTS",
    "ExtractionRecord",
    "list_updates",
    "mark_seen",
    "record_update",
    "seal_update_texts",
    "seen_among",
]


def seen_among(conversation_id: str, message_ids: Sequence[str]) -> Op[set[str]]:
    seen: set[str] = set()
    for start in range(0, len(message_ids), BATCH):
        batch = list(message_ids[start : start + BATCH])
        rows = yield Query(
            f"SELECT message_id FROM longterm_seen WHERE conversation_id = ? AND message_id IN ({placeholders(len(batch))})",
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


#: The columns of an extraction record that may quote the user (the model's notes, its raw
#: output, an error about that output): sealed for the owner under encryption at rest,
#: bound to the record. Outcome, signal names, counts and token usage stay in clear.
UPDATE_TEXTS = ("notes", "raw_output", "error")


def seal_update_texts(scope: Scope, update_id: str, *values: str | None) -> list[str | None]:
    """``notes, raw_output, error`` as stored (as they are when encryption is off)."""
    return [
        seal(f"longterm_updates.{column}", update_id, scope.tenant, scope.user, value)
        for column, value in zip(UPDATE_TEXTS, values, strict=True)
    ]


def record_update(rt: Runtime, scope: Scope, rec: ExtractionRecord) -> Op[str]:
    uid = rt.make_id()
    notes, raw_output, error = seal_update_texts(
        scope,
        uid,
        dump_json(list(rec.notes)),
        None if rec.raw_output is None else rec.raw_output[:100_000],
        None if rec.error is None else rec.error[:4000],
    )
    yield Exec(
        "INSERT INTO longterm_updates (id, tenant_id, user_id, agent_id, conversation_id, job_id, "
        "outcome, signals, llm_calls, prompt_tokens, completion_tokens, counts, notes, raw_output, "
        "error, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            uid,
            *owner(scope),
            rec.conversation_id,
            rec.job_id,
            rec.outcome,
            dump_json(list(rec.signals)),
            rec.llm_calls,
            rec.prompt_tokens,
            rec.completion_tokens,
            dump_json(rec.counts),
            notes,
            raw_output,
            error,
            rt.clock(),
        ),
    )
    return uid


def list_updates(scope: Scope, limit: int = 50) -> Op[list[dict[str, Any]]]:
    """The extraction log of the owner, newest first."""
    rows = yield Query(
        "SELECT id, conversation_id, job_id, outcome, signals, llm_calls, prompt_tokens, "
        f"completion_tokens, counts, notes, raw_output, error, created_at FROM longterm_updates "
        f"WHERE {OWNER} ORDER BY seq DESC LIMIT ?",
        (*owner(scope), max(1, min(limit, 500))),
    )
    return [_update(r) for r in rows]


def _update(row: Row) -> dict[str, Any]:
    (
        uid,
        conversation_id,
        job_id,
        outcome,
        signals,
        llm_calls,
        prompt_tokens,
        completion_tokens,
        counts,
        notes,
        raw_output,
        error,
        created_at,
    ) = row
    # Once the owner's key was destroyed these read as absent (the record keeps its counts).
    notes = unseal("longterm_updates.notes", uid, notes)
    raw_output = unseal("longterm_updates.raw_output", uid, raw_output)
    error = unseal("longterm_updates.error", uid, error)
    return {
        "id": uid,
        "conversation_id": conversation_id,
        "job_id": job_id,
        "outcome": outcome,
        "signals": json.loads(signals) if signals else [],
        "llm_calls": llm_calls,
        "prompt_tokens": prompt_tokens,
        "completion_tokens": completion_tokens,
        "counts": json.loads(counts) if counts else {},
        "notes": json.loads(notes) if notes else [],
        "raw_output": raw_output,
        "error": error,
        "created_at": from_micros(created_at).isoformat(),
    }
