"""Recording a context assembly (sans-IO): the record row and one row per injected id.

A record keeps ids, versions and the assembly's report, never the text of an item: a
fact deleted later leaves its id behind (a tombstone), not what it said.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

from memstrata.context.tiers import TierItem
from memstrata.conversation.conversations import hold_conversation
from memstrata.domain.context import Context
from memstrata.runtime import Runtime
from memstrata.sealing import seal, unseal
from memstrata.storage.plan import Exec, Op
from memstrata.storage.records import dump_json
from memstrata.types import Scope

__all__ = ["Entry", "entries", "open_report", "record_context", "seal_report", "stored_report"]

# Tier -> the kind of item it injects (a tier another feature adds is an ``item``).
_KINDS: Mapping[str, str] = {
    "facts": "fact",
    "summary": "summary",
    "working": "working",
    "plan": "plan",
    "profile": "profile",
    "iterations": "iteration",
    "recall": "message",
}
# Report keys never stored: text (a provider's provenance is free-form), and the ids of
# what did not enter the prompt (a dropped candidate, a range's end): a record names by
# id only what the model saw, in its item rows, which deletions turn into tombstones.
# Ids anywhere else would outlive a deletion and make its receipt's scan find them.
_DROPPED_KEYS = frozenset({"text", "content", "document", "id", "provenance"})
_CHUNK = 200  # item rows per INSERT (7 parameters each)


@dataclass(frozen=True, slots=True)
class Entry:
    tier: str
    kind: str
    item_id: str
    conversation_id: str
    version: int | None


def _version(provenance: Mapping[str, Any], kind: str) -> int | None:
    value = provenance.get("updated_at" if kind == "fact" else "version")
    return value if isinstance(value, int) and not isinstance(value, bool) else None


def _tier_entry(tier: str, item: TierItem, conversation_id: str) -> Entry:
    kind = _KINDS.get(tier, "item")
    p = item.provenance
    if kind == "message":
        return Entry(
            tier,
            kind,
            str(p.get("message_id", item.id)),
            str(p.get("conversation_id", conversation_id)),
            None,
        )
    if kind == "fact":
        return Entry(tier, kind, str(p.get("fact_id", item.id)), "", _version(p, kind))
    return Entry(tier, kind, item.id, "", _version(p, kind))


def entries(conversation_id: str, ctx: Context) -> list[Entry]:
    """Every item the context injected, in prompt order: the system run, the tiers'
    items, then the recent window."""
    out = [Entry("system", "message", m.id, conversation_id, None) for m in ctx.system]
    for tier, items in ctx.injected.items():
        out.extend(_tier_entry(tier, item, conversation_id) for item in items)
    out.extend(Entry("recent", "message", m.id, conversation_id, None) for m in ctx.window)
    return out


def _kept(key: str) -> bool:
    return key not in _DROPPED_KEYS and not key.endswith(("_id", "_ids"))


def _scrub(value: Any) -> Any:
    if isinstance(value, dict):
        return {k: _scrub(v) for k, v in value.items() if _kept(k)}
    if isinstance(value, list):
        return [_scrub(v) for v in value]
    return value


def stored_report(ctx: Context) -> dict[str, Any]:
    """The report as a record keeps it: counts and reasons only (its leaf is the record's
    ``leaf_id`` column, put back into the report when read)."""
    report: dict[str, Any] = _scrub(ctx.report.to_dict())
    return report


def seal_report(scope: Scope, record_id: str, report: str) -> str:
    """A record's report (JSON text) as stored: sealed for its owner, bound to the record
    (as it is when encryption is off). Its counts and reasons are little of the user's,
    but they are the only free-form part of a record (a tier another feature adds names
    its own reasons), so nothing of them is left readable."""
    return seal("context_records.report", record_id, scope.tenant, scope.user, report) or report


def open_report(record_id: str, report: str) -> str | None:
    """A stored report's JSON text; None once its owner's data key was destroyed (the
    record reads as deleted)."""
    return unseal("context_records.report", record_id, report)


def _insert_items(context_id: str, rows: Sequence[Entry]) -> Op[None]:
    # A few statements per record, not one per item (a context may inject a hundred).
    for start in range(0, len(rows), _CHUNK):
        chunk = rows[start : start + _CHUNK]
        values = ", ".join(["(?, ?, ?, ?, ?, ?, ?)"] * len(chunk))
        params: list[object] = []
        for position, e in enumerate(chunk, start):
            params += [
                context_id,
                position,
                e.tier,
                e.kind,
                e.item_id,
                e.conversation_id,
                e.version,
            ]
        yield Exec(
            "INSERT INTO context_record_items (context_id, position, tier, kind, item_id, "
            f"conversation_id, version) VALUES {values}",
            params,
        )


def record_context(
    rt: Runtime, scope: Scope, conversation_id: str, budget: int, ctx: Context
) -> Op[str]:
    """Store a record of ``ctx`` (assembled for ``conversation_id`` in ``scope``); its id."""
    # Under the conversation (shared): a concurrent delete either sees this record or
    # makes this write find no conversation, never leaves an orphan.
    yield from hold_conversation(scope, conversation_id)
    rid = rt.make_id()
    yield Exec(
        "INSERT INTO context_records (id, tenant_id, user_id, agent_id, conversation_id, "
        "leaf_id, budget, report, created_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?)",
        (
            rid,
            scope.tenant,
            scope.user,
            scope.agent_key,
            conversation_id,
            ctx.report.leaf_id,
            budget,
            seal_report(scope, rid, dump_json(stored_report(ctx)) or "{}"),
            rt.clock(),
        ),
    )
    yield from _insert_items(rid, entries(conversation_id, ctx))
    return rid
