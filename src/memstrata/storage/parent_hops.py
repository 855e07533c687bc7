"""Parents by integer key (migration 26): ``messages.parent_seq`` is the parent's ``seq``.

A branch is walked from its leaf towards the root, one parent per hop. By text id each hop
is a lookup in the ``(conversation_id, id)`` index and then of the row; by ``parent_seq``
it is one lookup of the row by its primary key. ``parent_id`` stays the message's named
parent (answers, the tree, exports); ``parent_seq`` only makes the walk cheaper. Every
write that sets ``parent_id`` sets it too; rows inserted without it (an import) get it
from :func:`fill_parent_seqs`, and until then a walk still follows ``parent_id``.
"""

from __future__ import annotations

from collections.abc import Sequence

from memstrata.storage.plan import Exec, Op
from memstrata.storage.sql import BATCH, placeholders

__all__ = ["FILL_PARENT_SEQS", "PARENT_SEQ_COLUMN", "fill_parent_seqs", "parent_hop"]

PARENT_SEQ_COLUMN = "ALTER TABLE messages ADD COLUMN parent_seq BIGINT"

# Children whose parent_seq is missing get their parent's seq. ``{where}``: "" or a
# conversation filter on ``messages`` (its parameters then follow).
FILL_PARENT_SEQS = (
    "UPDATE messages SET parent_seq = (SELECT p.seq FROM messages p"
    " WHERE p.conversation_id = messages.conversation_id AND p.id = messages.parent_id)"
    " WHERE parent_seq IS NULL AND parent_id IS NOT NULL{where}"
)


def parent_hop(child: str) -> str:
    """The ``seq`` of ``child``'s parent (``child`` a row alias carrying ``seq`` and
    ``parent_seq``): the stored key, else (not filled yet) the lookup by id through the
    child's own row, so a walk carries no text through its recursion. A walk joins
    ``messages m ON m.seq = <this>``."""
    return (
        f"COALESCE({child}.parent_seq, (SELECT h.seq FROM messages c JOIN messages h"
        " ON h.conversation_id = c.conversation_id AND h.id = c.parent_id"
        f" WHERE c.seq = {child}.seq))"
    )


def fill_parent_seqs(conversation_ids: Sequence[str]) -> Op[None]:
    """Give ``parent_seq`` to these conversations' messages that lack it (after an import:
    exports carry ``parent_id``, not the store's own ``seq``)."""
    for start in range(0, len(conversation_ids), BATCH):
        batch = list(conversation_ids[start : start + BATCH])
        where = f" AND conversation_id IN ({placeholders(len(batch))})"
        yield Exec(FILL_PARENT_SEQS.format(where=where), batch)
