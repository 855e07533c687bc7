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

Each chain that forks off another also has a row in ``message_forks`` (the chain it
leaves and at what depth), written with its first message: the walk reads one narrow,
clustered row per fork instead of two lookups in the wide messages table (about 4x
faster on a branch crossing 2,000 forks; see ``bench context``).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from dataclasses import dataclass

from memstrata.storage.branch_tables import FILL_FORKS
from memstrata.storage.plan import Exec, Op, Query
from memstrata.storage.sql import BATCH, placeholders

__all__ = [
    "Branch",
    "Label",
    "active_branches",
    "branch_of",
    "fill_forks",
    "label_child",
    "labels_of",
]


@dataclass(frozen=True, slots=True)
class Label:
    """A new message's ancestry label, and the fork its chain makes (if it starts one
    under a parent: ``(parent's chain, parent's depth)``)."""

    chain_id: str
    fork: tuple[str, int] | None


def label_child(message_id: str, parent: tuple[str | None, int, bool] | None) -> Label:
    """The label of a new message given its parent's ``(chain, depth, has a child)``.

    A first child continues the parent's chain; any later child, and a root, starts its
    own chain (named by its id). A parent stored without a label (None) cannot be
    continued: the child starts a chain that forks off nothing known.
    """
    if parent is None:
        return Label(message_id, None)
    chain, depth, has_child = parent
    if chain is None:
        return Label(message_id, None)
    if not has_child:
        return Label(chain, None)
    return Label(message_id, (chain, depth))


def parent_label(conversation_id: str, parent_id: str) -> Op[tuple[str | None, int, bool]]:
    """The ``(chain, depth, has a child)`` of a stored message, for :func:`label_child`."""
    rows = yield Query(
        "SELECT p.chain_id, p.depth, EXISTS (SELECT 1 FROM messages c "
        "WHERE c.conversation_id = p.conversation_id AND c.parent_id = p.id) "
        "FROM messages p WHERE p.conversation_id = ? AND p.id = ?",
        (conversation_id, parent_id),
    )
    chain, depth, has_child = rows[0]
    return chain, int(depth), bool(has_child)


def record_fork(conversation_id: str, message_id: str, label: Label) -> Op[None]:
    """Write the fork row of a message that starts a chain under a parent (else nothing)."""
    if label.fork is not None:
        yield Exec(
            "INSERT INTO message_forks (conversation_id, head_id, from_chain, from_depth) "
            "VALUES (?, ?, ?, ?)",
            (conversation_id, message_id, *label.fork),
        )


def fill_forks(conversation_ids: Sequence[str]) -> Op[None]:
    """Write the missing fork rows of the given conversations' stored messages (after an
    import, whose rows carry their labels but not the forks derived from them)."""
    for start in range(0, len(conversation_ids), BATCH):
        batch = list(conversation_ids[start : start + BATCH])
        where = f" AND h.conversation_id IN ({placeholders(len(batch))})"
        yield Exec(FILL_FORKS.format(where=where), batch)


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

    Walks forks, not messages: one ``message_forks`` row per fork on the branch, and only
    as far up as ``min_depth`` (a caller judging messages no shallower than that needs no more).
    """
    rows = yield Query(
        "WITH RECURSIVE ch(chain_id, exit_depth) AS ("
        " SELECT chain_id, depth FROM messages WHERE conversation_id = ? AND id = ?"
        " UNION ALL SELECT f.from_chain, f.from_depth FROM ch"
        " JOIN message_forks f ON f.conversation_id = ? AND f.head_id = ch.chain_id"
        " WHERE f.from_depth >= ?)"
        " SELECT chain_id, exit_depth FROM ch",
        (conversation_id, leaf_id, conversation_id, min_depth),
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


def active_branches(conversation_ids: Sequence[str], min_depth: int = 0) -> Op[dict[str, Branch]]:
    """The active branch of each given conversation (the branch ending at its
    ``active_leaf_id``), in one walk per batch of conversations: one row per fork on
    each branch, as far up as ``min_depth`` (as :func:`branch_of`). A conversation with
    no active leaf, or whose leaf carries no label, is left out (nothing to judge by)."""
    out: dict[str, Branch] = {}
    leaves: dict[str, str] = {}
    exits: dict[str, dict[str, int]] = {}
    for start in range(0, len(conversation_ids), BATCH):
        batch = list(conversation_ids[start : start + BATCH])
        rows = yield Query(
            "WITH RECURSIVE ch(conversation_id, leaf_id, chain_id, exit_depth) AS ("
            " SELECT m.conversation_id, m.id, m.chain_id, m.depth FROM conversations c"
            " JOIN messages m ON m.conversation_id = c.id AND m.id = c.active_leaf_id"
            f" WHERE c.id IN ({placeholders(len(batch))})"
            " UNION ALL SELECT f.conversation_id, ch.leaf_id, f.from_chain, f.from_depth FROM ch"
            " JOIN message_forks f ON f.conversation_id = ch.conversation_id"
            " AND f.head_id = ch.chain_id WHERE f.from_depth >= ?)"
            " SELECT conversation_id, leaf_id, chain_id, exit_depth FROM ch",
            (*batch, min_depth),
        )
        for cid, leaf, chain_id, depth in rows:
            leaves[cid] = leaf
            if chain_id is not None:
                chains = exits.setdefault(cid, {})
                chains[chain_id] = max(chains.get(chain_id, -1), int(depth))
    for cid, chains in exits.items():
        out[cid] = Branch(cid, leaves[cid], chains)
    return out
