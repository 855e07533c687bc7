"""Rolling summaries of a branch (sans-IO).

A summary records the message it covers up to. It serves a leaf only when that
message is an ancestor of (or is) the leaf, checked on the stored tree, so a
branch that diverged before it never gets it.
"""

from __future__ import annotations

from collections.abc import Sequence

from memstrata.conversation.branch import resolve_leaf
from memstrata.domain.context import Summary
from memstrata.errors import NotFound
from memstrata.sealing import seal, unseal
from memstrata.storage.plan import Exec, Op, Query, Row
from memstrata.storage.records import from_micros
from memstrata.storage.sql import placeholders
from memstrata.types import Message, Scope

__all__ = [
    "SUMMARY_COLUMNS",
    "Summary",
    "forget_messages",
    "get_summary",
    "seal_summary",
    "summary_for",
    "to_summary",
]


SUMMARY_COLUMNS = (
    "id, conversation_id, up_to_id, up_to_depth, up_to_branch_tokens, version, previous_id, "
    "content, method, created_at"
)


def seal_summary(scope: Scope, sid: str, content: str) -> str:
    """A summary's text as stored: sealed for its owner, bound to the summary's id."""
    return seal("summaries.content", sid, scope.tenant, scope.user, content) or content


def to_summary(row: Row) -> Summary | None:
    """A ``summaries`` row read as :data:`SUMMARY_COLUMNS` (None once its owner's data key
    was destroyed: the summary reads as deleted)."""
    (
        sid,
        conversation_id,
        up_to_id,
        up_to_depth,
        up_to_branch_tokens,
        version,
        previous_id,
        content,
        method,
        created_at,
    ) = row
    content = unseal("summaries.content", sid, content)
    if content is None:
        return None
    return Summary(
        sid,
        conversation_id,
        up_to_id,
        up_to_depth,
        up_to_branch_tokens,
        version,
        previous_id,
        content,
        method,
        from_micros(created_at),
    )


def _ancestor_at(conversation_id: str, leaf_id: str, depth: int) -> Op[str | None]:
    """The id of the leaf's ancestor at ``depth`` (walks only leaf depth - ``depth`` rows)."""
    rows = yield Query(
        "WITH RECURSIVE b(id, parent_id, depth) AS ("
        " SELECT id, parent_id, depth FROM messages WHERE id = ? AND conversation_id = ?"
        " UNION ALL SELECT m.id, m.parent_id, m.depth FROM messages m JOIN b ON m.id = b.parent_id"
        " AND m.conversation_id = ? WHERE b.depth > ?) SELECT id FROM b WHERE depth = ?",
        (leaf_id, conversation_id, conversation_id, depth, depth),
    )
    return rows[0][0] if rows else None


def summary_for(conversation_id: str, leaf: Message, candidates: int = 8) -> Op[Summary | None]:
    """The deepest summary whose cover point lies on the leaf's branch."""
    rows = yield Query(
        f"SELECT {SUMMARY_COLUMNS} FROM summaries WHERE conversation_id = ? AND up_to_depth <= ? "
        "ORDER BY up_to_depth DESC, version DESC LIMIT ?",
        (conversation_id, leaf.depth, candidates),
    )
    for row in rows:
        s = to_summary(row)
        if s is None:
            continue
        if s.up_to_id == leaf.id:
            return s
        if (yield from _ancestor_at(conversation_id, leaf.id, s.up_to_depth)) == s.up_to_id:
            return s
    return None


def get_summary(scope: Scope, conversation_id: str, leaf_id: str | None = None) -> Op[Summary]:
    """The summary that serves the leaf's branch (NotFound when none does)."""
    leaf = yield from resolve_leaf(scope, conversation_id, leaf_id)
    if leaf is not None:
        found = yield from summary_for(conversation_id, leaf.message)
        if found is not None:
            return found
    raise NotFound("no summary serves this branch", kind="summary")


def forget_messages(conversation_id: str, ids: Sequence[str]) -> Op[None]:
    """Cascade step for single deleted messages: a summary covering one of them (its cover
    point is the message or below it, and ``ids`` holds a whole subtree) is invalidated;
    the next compaction writes a new one from what remains."""
    marks = placeholders(len(ids))
    yield Exec(
        f"DELETE FROM summaries WHERE conversation_id = ? AND up_to_id IN ({marks})",
        (conversation_id, *ids),
    )
