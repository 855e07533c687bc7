"""Deleting one message and re-attaching its children to its parent (sans-IO): n8n's
``deleteMessages``, which removes the named messages only, on a tree.

The default delete removes the subtree, so no stored path ever changes. A splice changes
the paths under the message, and so rewrites what is stored along them: every descendant
is one level shallower and its branch holds the message's tokens no more; the ancestry
labels stay exact (the chain the message continued goes on in its chain child, a chain it
started is renamed after that child, and the forks under it move up one level, those
off the message itself to its parent); a leading system run it ended ends at its parent.
Summaries whose cover point moved are invalidated (they held the message's text).
"""

from __future__ import annotations

from memstrata.conversation.conversations import hold_conversation
from memstrata.conversation.lookup import require_message
from memstrata.conversation.messages import newest_leaf
from memstrata.runtime import Runtime
from memstrata.storage.plan import Exec, Op, Query
from memstrata.storage.records import to_message
from memstrata.storage.sql import BATCH, placeholders
from memstrata.types import Scope

__all__ = ["DELETE_MODES", "splice_message"]

#: How a message delete goes: with its subtree (the default), or alone (``splice``).
DELETE_MODES = ("subtree", "splice")

_DESCENDANTS_SQL = (
    "WITH RECURSIVE sub(id) AS ("
    " SELECT id FROM messages WHERE parent_id = ? AND conversation_id = ?"
    " UNION ALL SELECT m.id FROM messages m JOIN sub ON m.parent_id = sub.id"
    " AND m.conversation_id = ?"
    ") SELECT id FROM sub"
)
_LABEL_SQL = "SELECT chain_id FROM messages WHERE conversation_id = ? AND id = ?"
_PARENT_SQL = "SELECT chain_id, seq FROM messages WHERE conversation_id = ? AND id = ?"


def splice_message(rt: Runtime, scope: Scope, conversation_id: str, message_id: str) -> Op[int]:
    """Delete ``message_id`` alone; its children become children of its parent (roots when
    it was a root). Returns 1 (the messages deleted)."""
    conv = yield from hold_conversation(scope, conversation_id, exclusive=True)
    target = to_message((yield from require_message(conversation_id, message_id)))
    mid, parent, depth = target.id, target.parent_id, target.depth
    chain = (yield Query(_LABEL_SQL, (conversation_id, mid)))[0][0]
    parent_chain, target_parent_seq = None, None
    if parent is not None:
        rows = yield Query(_PARENT_SQL, (conversation_id, parent))
        parent_chain, target_parent_seq = rows[0]
    rows = yield Query(_DESCENDANTS_SQL, (mid, conversation_id, conversation_id))
    below = [str(r[0]) for r in rows]
    if below:
        yield from _move_forks(conversation_id, below, chain, depth, parent_chain)
        if chain == mid:  # the message heads its chain: its chain child heads it now
            yield from _rename_chain(conversation_id, mid)
        for start in range(0, len(below), BATCH):
            batch = below[start : start + BATCH]
            yield Exec(
                "UPDATE messages SET depth = depth - 1, branch_tokens = branch_tokens - ? "
                f"WHERE conversation_id = ? AND id IN ({placeholders(len(batch))})",
                (target.token_count, conversation_id, *batch),
            )
        yield Exec(
            "UPDATE messages SET system_tail_id = ? WHERE conversation_id = ? AND system_tail_id = ?",
            (parent, conversation_id, mid),
        )
        yield Exec(
            "UPDATE messages SET parent_id = ?, parent_seq = ? "
            "WHERE conversation_id = ? AND parent_id = ?",
            (parent, target_parent_seq, conversation_id, mid),
        )
        yield from rt.cascade.moved_messages(conversation_id, below)
    yield from rt.cascade.delete_messages(conversation_id, [mid])
    leaf = conv.active_leaf_id
    if leaf == mid:  # a leaf: its parent ends the branch now (a root: the newest leaf)
        leaf = parent if parent is not None else (yield from newest_leaf(conversation_id))
    yield Exec(
        "UPDATE conversations SET active_leaf_id = ?, message_count = message_count - 1, "
        "updated_at = ? WHERE id = ?",
        (leaf, rt.clock(), conversation_id),
    )
    return 1


def _move_forks(
    conversation_id: str, below: list[str], chain: str | None, depth: int, parent_chain: str | None
) -> Op[None]:
    """Forks off the message go to its parent (none under a root: its children are roots);
    forks off messages below it move up one level with them."""
    if chain is None:  # unlabelled (never on a current store): nothing to keep exact
        return
    if parent_chain is None:
        yield Exec(
            "DELETE FROM message_forks WHERE conversation_id = ? AND from_chain = ? "
            "AND from_depth = ?",
            (conversation_id, chain, depth),
        )
    else:
        yield Exec(
            "UPDATE message_forks SET from_chain = ?, from_depth = ? WHERE conversation_id = ? "
            "AND from_chain = ? AND from_depth = ?",
            (parent_chain, depth - 1, conversation_id, chain, depth),
        )
    for start in range(0, len(below), BATCH):
        batch = below[start : start + BATCH]
        yield Exec(
            "UPDATE message_forks SET from_depth = from_depth - 1 WHERE conversation_id = ? "
            "AND from_depth > ? AND from_chain IN (SELECT chain_id FROM messages WHERE "
            f"conversation_id = ? AND id IN ({placeholders(len(batch))}))",
            (conversation_id, depth, conversation_id, *batch),
        )


def _rename_chain(conversation_id: str, head: str) -> Op[None]:
    """The chain ``head`` started goes on under its chain child's id (a chain is named by
    its first message), with the fork ``head`` made, if any."""
    rows = yield Query(
        "SELECT id FROM messages WHERE conversation_id = ? AND parent_id = ? AND chain_id = ?",
        (conversation_id, head, head),
    )
    if not rows:
        return  # no child continues it: every child heads its own chain already
    successor = str(rows[0][0])
    yield Exec(
        "UPDATE messages SET chain_id = ? WHERE conversation_id = ? AND chain_id = ? AND id <> ?",
        (successor, conversation_id, head, head),
    )
    yield Exec(
        "UPDATE message_forks SET from_chain = ? WHERE conversation_id = ? AND from_chain = ?",
        (successor, conversation_id, head),
    )
    yield Exec(
        "INSERT INTO message_forks (conversation_id, head_id, from_chain, from_depth) "
        "SELECT conversation_id, ?, from_chain, from_depth FROM message_forks "
        "WHERE conversation_id = ? AND head_id = ?",
        (successor, conversation_id, head),
    )
