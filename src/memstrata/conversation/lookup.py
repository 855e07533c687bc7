"""Finding one message of a conversation by id (sans-IO).

The caller has checked the conversation belongs to its scope; these look only inside it.
"""

from __future__ import annotations

from memstrata.errors import InvalidInput, NotFound
from memstrata.ids import parse_id
from memstrata.storage.plan import Op, Query, Row
from memstrata.storage.records import MESSAGE_COLUMNS

__all__ = ["message_row", "require_message", "system_tail"]

# Where ``system_tail_id`` sits in a message row (the mapping to Message leaves it out).
_SYSTEM_TAIL = [c.strip() for c in MESSAGE_COLUMNS.split(",")].index("system_tail_id")


def system_tail(row: Row) -> str | None:
    """The deepest message of the leading system run of the branch ending at this row."""
    tail: str | None = row[_SYSTEM_TAIL]
    return tail


def message_row(conversation_id: str, message_id: str) -> Op[Row | None]:
    rows = yield Query(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ? AND conversation_id = ?",
        (message_id, conversation_id),
    )
    return rows[0] if rows else None


def require_message(conversation_id: str, message_id: str, what: str = "message") -> Op[Row]:
    """The message's row; NotFound (``kind=what``) when the conversation has no such message."""
    try:
        mid = parse_id(message_id, field=what)
    except InvalidInput:
        # A malformed id cannot name a stored message: same answer as a missing one.
        raise NotFound(f"{what} {message_id} not found", kind=what) from None
    row = yield from message_row(conversation_id, mid)
    if row is None:
        raise NotFound(f"{what} {message_id} not found", kind=what)
    return row
