"""Column lists and row mappers shared by every SQL backend."""

from __future__ import annotations

import json
from typing import Any

from memstrata import strictjson
from memstrata.errors import InvalidInput
from memstrata.instants import from_micros, to_micros
from memstrata.storage.plan import Row
from memstrata.types import Conversation, FileRef, Message, Role, Status, ToolCall

__all__ = [
    "CONVERSATION_COLUMNS",
    "MESSAGE_COLUMNS",
    "check_text",
    "dump_json",
    "from_micros",
    "load_json",
    "storable_text",
    "to_conversation",
    "to_message",
    "to_micros",
]

MESSAGE_COLUMNS = (
    "id, conversation_id, parent_id, role, content, files, tool_calls, tool_call_id, status, "
    "metadata, occurred_at, created_at, seq, depth, token_count, branch_tokens, system_tail_id, "
    "position"
)
CONVERSATION_COLUMNS = (
    "id, tenant_id, user_id, agent_id, title, metadata, active_leaf_id, created_at, "
    "updated_at, message_count"
)

_ROLES = {r.value: r for r in Role}
_STATUSES = {s.value: s for s in Status}


def check_text(value: str | None, field: str) -> None:
    """The one text rule of every backend: no NUL (PostgreSQL text cannot hold one, so
    SQLite refuses it too) and no lone surrogate (not encodable as UTF-8)."""
    if not value:
        return
    if "\x00" in value:
        raise InvalidInput(f"{field} must not contain NUL characters", field=field)
    if not value.isascii():
        try:
            value.encode()
        except UnicodeEncodeError:  # e.g. from a JSON "\ud800" escape
            raise InvalidInput(f"{field} is not valid Unicode text", field=field) from None


def storable_text(value: str) -> str:
    """``value`` made storable on every backend: NUL and lone surrogates, which
    :func:`check_text` refuses in input, are written as escapes instead (for text the
    store composes itself, such as a job's error, which must always be storable)."""
    if "\x00" in value:
        value = value.replace("\x00", "\\x00")
    if not value.isascii():
        value = value.encode("utf-8", "backslashreplace").decode("utf-8")
    return value


def dump_json(value: Any) -> str | None:
    """Empty containers are stored as NULL: most rows have none, and NULL costs nothing to read."""
    if not value:
        return None
    # Strict: NaN, Infinity or a lone surrogate is refused (InvalidInput), never stored.
    return strictjson.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def load_json(value: str | None, empty: Any) -> Any:
    return empty if value is None else json.loads(value)


def to_message(row: Row) -> Message:
    files = () if row[5] is None else tuple(FileRef.model_validate(f) for f in json.loads(row[5]))
    calls = () if row[6] is None else tuple(ToolCall.model_validate(c) for c in json.loads(row[6]))
    # Positional, in Message's field order: a frozen dataclass pays per keyword, and this
    # runs for every row a history or context read returns.
    occurred = from_micros(row[10])
    # Most messages are stored when they occur: one datetime serves both fields.
    created = occurred if row[11] == row[10] else from_micros(row[11])
    return Message(
        row[0],  # id
        row[1],  # conversation_id
        row[2],  # parent_id
        _ROLES[row[3]],
        row[4],  # content
        files,
        calls,
        row[7],  # tool_call_id
        _STATUSES[row[8]],
        {} if row[9] is None else json.loads(row[9]),  # metadata
        occurred,  # occurred_at
        created,  # created_at
        row[12],  # seq
        row[13],  # depth
        row[14],  # token_count
        row[15],  # branch_tokens
        row[17] or 0,  # position (row[16] is system_tail_id)
    )


def to_conversation(row: Row) -> Conversation:
    return Conversation(
        id=row[0],
        tenant=row[1],
        user=row[2],
        agent=row[3] or None,
        title=row[4],
        metadata={} if row[5] is None else json.loads(row[5]),
        active_leaf_id=row[6],
        created_at=from_micros(row[7]),
        updated_at=from_micros(row[8]),
        message_count=row[9],
    )
