"""Ancestry labels: "is message X on the branch ending at leaf L?" in O(1) per X.

Every message carries a ``chain_id``, written once at append. A chain is a run of
messages where each is the first child of the one before: a message continues its
parent's chain when the parent had no child yet, and starts a chain of its own (its
id) otherwise. So a chain is a path of the tree holding at most one message per
depth, and the branch from the root to any leaf crosses one chain per fork taken
(regenerations and edits), not one per message.

:func:`branch_of` reads the chains of a leaf's branch in one query, each with the
deepest depth the branch keeps of it; then X is an ancestor of (or is) L exactly
when X's chain is among them and X's depth is at most that chain's exit depth
(:meth:`Branch.contains`). Messages stored before the labels existed were labelled
by the migration that added them.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from memstrata.storage.plan import Op, Query
from memstrata.storage.sql import BATCH, placeholders

__all__ = ["CHAIN_SQL", "Branch", "branch_of", "labels_of"]

# The chain of a new message, as an SQL expression over (conversation id, parent id, new
# id): the parent's chain when the parent has no child yet, else the new message's own id.
CHAIN_SQL = (
    "COALESCE((SELECT p.chain_id FROM messages p WHERE p.conversation_id = ? AND p.id = ? "
    "AND NOT EXISTS (SELECT 1 FROM messages c WHERE c.conversation_id = p.conversation_id "
    "AND c.parent_id = p.id)), ?)"
)


@dataclass(frozen=True, slots=True)
class Branch:
    """The chains of one branch: chain id -> deepest depth of it on the branch."""

    conversation_id: str
    leaf_id: str
    exits: Mapping[str, int]

    def contains(self, chain_id: str | None, depth: int) -> bool:
        """Whether a message of this conversation with that label is on the branch."""
        if chain_id is None:
            return False
        exit_depth = self.exits.get(chain_id)
        return exit_depth is not None and depth <= exit_depth


def branch_of(conversation_id: str, leaf_id: str, min_depth: int = 0) -> Op[Branch | None]:
    """The branch ending at ``leaf_id`` (None when no such message in the conversation).

    Walks chain heads, not messages: one row per fork on the branch, and only as far up
    as ``min_depth`` (a caller judging messages no shallower than that needs no more).
    """
    rows = yield Query(
        "WITH RECURSIVE ch(chain_id, exit_depth) AS ("
        " SELECT chain_id, depth FROM messages WHERE id = ? AND conversation_id = ?"
        " UNION ALL SELECT p.chain_id, p.depth FROM ch"
        " JOIN messages h ON h.conversation_id = ? AND h.id = ch.chain_id"
        " JOIN messages p ON p.conversation_id = h.conversation_id AND p.id = h.parent_id"
        " WHERE p.depth >= ?)"
        " SELECT chain_id, exit_depth FROM ch",
        (leaf_id, conversation_id, conversation_id, min_depth),
    )
    if not rows:
        return None
    exits: dict[str, int] = {}
    for chain_id, depth in rows:
        if chain_id is not None:
            exits[chain_id] = max(exits.get(chain_id, -1), int(depth))
    return Branch(conversation_id, leaf_id, exits)


def labels_of(conversation_id: str, ids: Sequence[str]) -> Op[dict[str, tuple[str | None, int]]]:
    """``{message id: (chain id, depth)}`` for the given ids of one conversation (batched)."""
    out: dict[str, tuple[str | None, int]] = {}
    for start in range(0, len(ids), BATCH):
        batch = list(ids[start : start + BATCH])
        rows = yield Query(
            "SELECT id, chain_id, depth FROM messages WHERE conversation_id = ? "
            f"AND id IN ({placeholders(len(batch))})",
            (conversation_id, *batch),
        )
        for mid, chain_id, depth in rows:
            out[mid] = (chain_id, int(depth))
    return out
