"""Branch truth for facts: a fact whose every source message is off its conversation's
active branch (an answer regenerated away, a question edited away, what hung under a
deleted message) is *withdrawn*: superseded with reason :data:`BRANCH_ABANDONED`, which
its history shows; it is restored as soon as one of its source messages is on an active
branch again.

:func:`reconcile` runs inside the transaction that moves a conversation's active branch
(``Runtime.on_branch_change``: an append that forks, setting the active leaf, deleting
messages) and after an extraction applied new facts (planned on a branch that may have
been left meanwhile). The facts and the branches therefore never disagree once a write
has committed, and there is no job to lose. The cost falls on branch moves only, never
on the common append (a child of the active leaf): one indexed read of the
conversation's sources when no fact came from it; otherwise one walk of the forks of
the conversations those facts came from.

A source naming a conversation but no message cannot be judged and keeps its fact. A
withdrawal leaves the fact's event time alone (nothing changed in the world: memstrata
no longer holds that it was said) and ends it in system time.
"""

from __future__ import annotations

from collections.abc import Sequence

from memstrata.conversation.branches import active_branches, labels_of
from memstrata.longterm.model import FactSource
from memstrata.longterm.rows import event_row, fact_text, load_sources
from memstrata.runtime import Runtime
from memstrata.storage.plan import Exec, Op, Query
from memstrata.storage.sql import placeholders
from memstrata.types import Scope

__all__ = ["BRANCH_ABANDONED", "RESTORED", "before_conversations_delete", "reconcile"]

#: The reason of a withdrawn fact (status ``superseded``, no successor).
BRANCH_ABANDONED = "branch_abandoned"
#: The reason of the history event that brings a withdrawn fact back.
RESTORED = "branch active again"


_JUDGED = (
    "SELECT DISTINCT f.id FROM fact_sources s JOIN facts f ON f.id = s.fact_id "
    "WHERE s.conversation_id IN ({ids}) AND (f.status = 'active' "
    "OR (f.status = 'superseded' AND f.reason = ?))"
)


def reconcile(rt: Runtime, conversation_id: str) -> Op[None]:
    """Withdraw the active facts drawn from ``conversation_id`` whose every source is
    now off the active branches, and restore the withdrawn ones with a source back on."""
    rows = yield Query(_JUDGED.format(ids="?"), (conversation_id, BRANCH_ABANDONED))
    yield from _judge(rt, sorted(r[0] for r in rows), conversation_id)


def before_conversations_delete(rt: Runtime, conversation_ids: Sequence[str]) -> Op[None]:
    """Cascade step, before deleted conversations' provenance goes: a fact also drawn
    from other conversations is judged by those alone (the deleted conversation may have
    held its only source on an active branch). A fact drawn only from the deleted
    conversations is left to the forgetting step (an extracted one is erased)."""
    rows = yield Query(
        _JUDGED.format(ids=placeholders(len(conversation_ids))),
        (*conversation_ids, BRANCH_ABANDONED),
    )
    yield from _judge(rt, sorted(r[0] for r in rows), None, frozenset(conversation_ids))


def _judge(
    rt: Runtime, ids: Sequence[str], conversation_id: str | None, gone: frozenset[str] = frozenset()
) -> Op[None]:
    """Withdraw or restore each of ``ids`` by its sources (those in ``gone`` left out);
    the history events name ``conversation_id``."""
    if not ids:
        return
    found = yield from load_sources(ids)
    sources = {
        fid: [s for s in srcs if s.conversation_id not in gone] for fid, srcs in found.items()
    }
    live = yield from _live_sources(sources)
    facts = yield Query(
        "SELECT id, tenant_id, user_id, agent_id, status, content, content_key, category, "
        f"confidence FROM facts WHERE id IN ({placeholders(len(ids))}) ORDER BY seq",
        ids,
    )
    now = rt.clock()
    for fid, tenant, user, agent, status, content, key, category, confidence in facts:
        if not sources[fid]:
            continue  # nothing left to judge by
        scope = Scope(tenant, user, agent or None)
        believed = any(s in live for s in sources[fid])
        if status == "active" and not believed:
            yield Exec(
                "UPDATE facts SET status = 'superseded', superseded_by = NULL, reason = ?, "
                "changed_in = NULL, updated_at = ?, superseded_at = ? "
                "WHERE id = ? AND status = 'active'",
                (BRANCH_ABANDONED, now, now, fid),
            )
            event, reason = "superseded", BRANCH_ABANDONED
        elif status == "superseded" and believed:
            clash = yield Query(
                "SELECT 1 FROM facts WHERE tenant_id = ? AND user_id = ? AND agent_id = ? "
                "AND content_key = ? AND status = 'active'",
                (tenant, user, agent, key),
            )
            if clash:  # said again meanwhile: the active twin stands for it
                continue
            yield Exec(
                "UPDATE facts SET status = 'active', reason = NULL, updated_at = ?, "
                "superseded_at = NULL WHERE id = ? AND status = 'superseded' AND reason = ?",
                (now, fid, BRANCH_ABANDONED),
            )
            event, reason = "restored", RESTORED
        else:
            continue
        yield event_row(
            rt,
            scope,
            fid,
            event,
            fact_text(fid, content),
            category,
            float(confidence),
            reason=reason,
            conversation_id=conversation_id,
        )


def _live_sources(sources: dict[str, list[FactSource]]) -> Op[set[FactSource]]:
    """The sources that still count: on their conversation's active branch, or naming no
    message (nothing to judge by). A message gone counts as off."""
    wanted: dict[str, set[str]] = {}
    live: set[FactSource] = set()
    for srcs in sources.values():
        for s in srcs:
            if s.message_id is None:
                live.add(s)
            else:
                wanted.setdefault(s.conversation_id, set()).add(s.message_id)
    if not wanted:
        return live
    branches = yield from active_branches(sorted(wanted))
    for cid, mids in wanted.items():
        labels = yield from labels_of(cid, sorted(mids))
        branch = branches.get(cid)
        for mid, (chain, depth) in labels.items():
            if branch is None or branch.contains(chain, depth):
                live.add(FactSource(cid, mid))
    return live
