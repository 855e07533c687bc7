"""The DDL of ``message_forks`` (migration 19): one narrow row per chain that forks off
another (see :mod:`memstrata.conversation.branches`), so finding a leaf's branch walks
a small clustered table instead of two lookups per fork in the wide messages table."""

from __future__ import annotations

__all__ = ["FILL_FORKS", "FORK_TABLES"]

# head_id: the chain's first message (its id is the chain id); from_chain and
# from_depth: the chain and depth of that message's parent, where the chain leaves the
# one it forks from. Chains starting at a root message fork off nothing: no row.
FORK_TABLES = (
    """CREATE TABLE message_forks (
        conversation_id TEXT NOT NULL,
        head_id TEXT NOT NULL,
        from_chain TEXT NOT NULL,
        from_depth INTEGER NOT NULL,
        PRIMARY KEY (conversation_id, head_id)
    ){clustered}""",
)

# The fork rows of stored messages, from their labels (the migration over every
# conversation; an import over the conversations it brought, as ``{where}``).
FILL_FORKS = (
    "INSERT INTO message_forks (conversation_id, head_id, from_chain, from_depth) "
    "SELECT h.conversation_id, h.id, p.chain_id, p.depth FROM messages h "
    "JOIN messages p ON p.conversation_id = h.conversation_id AND p.id = h.parent_id "
    "WHERE h.chain_id = h.id AND p.chain_id IS NOT NULL{where} ON CONFLICT DO NOTHING"
)
