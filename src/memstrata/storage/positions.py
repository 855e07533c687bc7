"""Per-conversation message positions (migration 24): the ``seq`` answers show.

``messages.seq`` is one counter for the whole store: shown as it is, the gaps between one
user's messages would tell how much everyone else writes. Each message also gets a
``position``, 1, 2, 3, ... in its conversation (``conversations.last_position`` is the
counter, moved under the conversation's lock by each append); answers and page cursors
carry it, while the store keeps ordering by ``seq`` inside.
"""

from __future__ import annotations

from collections.abc import Sequence

from memstrata.storage.plan import Exec, Op
from memstrata.storage.sql import BATCH, placeholders

__all__ = ["FILL_POSITIONS", "POSITION_COLUMNS", "RAISE_LAST_POSITION", "fill_positions"]

POSITION_COLUMNS = (
    "ALTER TABLE messages ADD COLUMN position BIGINT",
    "ALTER TABLE conversations ADD COLUMN last_position BIGINT NOT NULL DEFAULT 0",
    "CREATE INDEX messages_position ON messages (conversation_id, position)",
)

# Messages without a position (all of them at the migration; an import's new rows) get the
# next ones of their conversation, in seq order. ``{where}``: "" or a conversation filter
# on ``m`` (its parameters then follow).
FILL_POSITIONS = (
    "UPDATE messages SET position = r.n FROM (SELECT m.seq AS seq, ROW_NUMBER() OVER "
    "(PARTITION BY m.conversation_id ORDER BY m.seq) + COALESCE((SELECT c.last_position "
    "FROM conversations c WHERE c.id = m.conversation_id), 0) AS n FROM messages m "
    "WHERE m.position IS NULL{where}) AS r WHERE messages.seq = r.seq"
)
# Then each conversation's counter: never below a position it gave (deleted ones included).
RAISE_LAST_POSITION = (
    "UPDATE conversations SET last_position = CASE WHEN top > last_position THEN top "
    "ELSE last_position END FROM (SELECT m.conversation_id AS cid, MAX(m.position) AS top "
    "FROM messages m WHERE 1 = 1{where} GROUP BY m.conversation_id) AS t "
    "WHERE conversations.id = t.cid"
)


def fill_positions(conversation_ids: Sequence[str]) -> Op[None]:
    """Give positions to the messages of these conversations that have none (after an
    import: exports leave positions out, as they leave ``seq`` out)."""
    for start in range(0, len(conversation_ids), BATCH):
        batch = list(conversation_ids[start : start + BATCH])
        where = f" AND m.conversation_id IN ({placeholders(len(batch))})"
        yield Exec(FILL_POSITIONS.format(where=where), batch)
        yield Exec(RAISE_LAST_POSITION.format(where=where), batch)
