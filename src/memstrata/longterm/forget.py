"""Cascade steps: what long-term memory forgets when messages, conversations or a user
are deleted (registered by :func:`memstrata.longterm.service.install`)."""

from __future__ import annotations

from collections.abc import Sequence

from memstrata.longterm.rows import erase
from memstrata.storage.plan import Exec, Op, Query
from memstrata.storage.sql import placeholders

__all__ = ["forget_conversations", "forget_messages", "forget_user"]


def _erase_orphans(touched: Sequence[str]) -> Op[None]:
    """Erase the extracted facts among ``touched`` that have no source left."""
    if not touched:
        return
    orphans = yield Query(
        f"SELECT id FROM facts WHERE id IN ({placeholders(len(touched))}) AND origin = 'extracted' "
        "AND NOT EXISTS (SELECT 1 FROM fact_sources s WHERE s.fact_id = facts.id)",
        touched,
    )
    yield from erase([r[0] for r in orphans])


def forget_messages(conversation_id: str, ids: Sequence[str]) -> Op[None]:
    """Cascade step for single deleted messages: they leave the provenance of facts (an
    extracted fact with no source left is erased) and the extraction watermark."""
    marks = placeholders(len(ids))
    rows = yield Query(
        f"SELECT DISTINCT fact_id FROM fact_sources WHERE conversation_id = ? "
        f"AND message_id IN ({marks})",
        (conversation_id, *ids),
    )
    touched = [r[0] for r in rows]
    yield Exec(
        f"DELETE FROM fact_sources WHERE conversation_id = ? AND message_id IN ({marks})",
        (conversation_id, *ids),
    )
    yield from _erase_orphans(touched)
    yield Exec(
        f"DELETE FROM longterm_seen WHERE conversation_id = ? AND message_id IN ({marks})",
        (conversation_id, *ids),
    )


def forget_conversations(ids: Sequence[str]) -> Op[None]:
    """Cascade step: a deleted conversation leaves no trace in long-term memory.

    Its messages leave the provenance of facts; an extracted fact with no source left is
    erased; a status change its extraction made (superseded, removed, evicted) is undone;
    profile sections written from it are cleared; its extraction log and watermark go.
    """
    marks = placeholders(len(ids))
    rows = yield Query(
        f"SELECT DISTINCT fact_id FROM fact_sources WHERE conversation_id IN ({marks})", ids
    )
    touched = [r[0] for r in rows]
    yield Exec(f"DELETE FROM fact_sources WHERE conversation_id IN ({marks})", ids)
    yield from _erase_orphans(touched)
    # Undo what the forgotten conversation's extractions changed. Two facts may now say
    # the same thing actively; the newer restored one stays marked rather than collide.
    changed = yield Query(
        f"SELECT id, tenant_id, user_id, agent_id, content_key FROM facts WHERE changed_in IN ({marks}) ORDER BY seq",
        ids,
    )
    for fid, tenant, user, agent, key in changed:
        clash = yield Query(
            "SELECT 1 FROM facts WHERE tenant_id = ? AND user_id = ? AND agent_id = ? "
            "AND content_key = ? AND status = 'active'",
            (tenant, user, agent, key),
        )
        if clash:
            yield Exec(
                "UPDATE facts SET reason = NULL, changed_in = NULL, superseded_by = NULL WHERE id = ?",
                (fid,),
            )
        else:
            # Believed again: its event and system time run on (nothing ended them).
            yield Exec(
                "UPDATE facts SET status = 'active', reason = NULL, changed_in = NULL, "
                "superseded_by = NULL, valid_to = NULL, superseded_at = NULL WHERE id = ?",
                (fid,),
            )
    yield Exec(f"DELETE FROM fact_events WHERE conversation_id IN ({marks})", ids)
    sections = yield Query(
        "SELECT DISTINCT tenant_id, user_id, agent_id, section FROM profile_sources "
        f"WHERE conversation_id IN ({marks})",
        ids,
    )
    for tenant, user, agent, section in sections:
        for table in ("profile_sections", "profile_section_versions"):  # its history too
            yield Exec(
                f"DELETE FROM {table} WHERE tenant_id = ? AND user_id = ? AND agent_id = ? "
                "AND section = ?",
                (tenant, user, agent, section),
            )
        yield Exec(
            "DELETE FROM profile_sources WHERE tenant_id = ? AND user_id = ? AND agent_id = ? AND section = ?",
            (tenant, user, agent, section),
        )
    yield Exec(f"DELETE FROM longterm_updates WHERE conversation_id IN ({marks})", ids)
    yield Exec(f"DELETE FROM longterm_seen WHERE conversation_id IN ({marks})", ids)


def forget_user(tenant: str, user: str) -> Op[None]:
    """Cascade step: everything long-term of the user, every agent, every origin."""
    yield Exec(
        "DELETE FROM fact_sources WHERE fact_id IN (SELECT id FROM facts WHERE tenant_id = ? AND user_id = ?)",
        (tenant, user),
    )
    for table in (
        "fact_events",
        "fact_versions",
        "facts",
        "profile_sections",
        "profile_section_versions",
        "profile_sources",
        "longterm_updates",
        "memory_owners",
    ):
        yield Exec(f"DELETE FROM {table} WHERE tenant_id = ? AND user_id = ?", (tenant, user))
