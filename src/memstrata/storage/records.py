"""Column lists and row mappers shared by every SQL backend."""

from __future__ import annotations

import json
from datetime import UTC, datetime, timedelta
from typing import Any

from memstrata import strictjson
from memstrata.errors import InvalidInput
from memstrata.sealing import PREFIX, seal, unseal
from memstrata.storage.plan import Row
from memstrata.types import Conversation, FileRef, Message, Role, Status, ToolCall

__all__ = [
    "CONVERSATION_COLUMNS",
    "MESSAGE_COLUMNS",
    "check_text",
    "dump_json",
    "from_micros",
    "load_json",
    "open_message_texts",
    "seal_message_texts",
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


def to_micros(value: datetime) -> int:
    if value.tzinfo is None:
        value = value.replace(tzinfo=UTC)
    return int(value.timestamp() * 1_000_000)


_EPOCH = datetime(1970, 1, 1, tzinfo=UTC)


def from_micros(value: int) -> datetime:
    # Exact integer arithmetic, and about 3x cheaper than fromtimestamp() on a float.
    return _EPOCH + timedelta(microseconds=value)


def dump_json(value: Any) -> str | None:
    """Empty containers are stored as NULL: most rows have none, and NULL costs nothing to read."""
    if not value:
        return None
    # Strict: NaN, Infinity or a lone surrogate is refused (InvalidInput), never stored.
    return strictjson.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def load_json(value: str | None, empty: Any) -> Any:
    return empty if value is None else json.loads(value)


#: The message columns sealed with the owner's key (encryption at rest): what the user
#: said and attached. Role, status, times, counts and metadata stay in clear.
_SEALED_MESSAGE = ("content", "files", "tool_calls")
_SEALED_MARK = PREFIX[0]


def seal_message_texts(
    tenant: str, user: str, conversation_id: str, message_id: str, *values: str | None
) -> list[str | None]:
    """``content, files, tool_calls`` as stored: sealed for the conversation's owner,
    bound to this message (as they are when encryption is off)."""
    row = f"{conversation_id}/{message_id}"
    return [
        seal(f"messages.{column}", row, tenant, user, value)
        for column, value in zip(_SEALED_MESSAGE, values, strict=True)
    ]


def open_message_texts(row: Row) -> Row:
    """``row`` with its sealed columns opened; a message whose key was destroyed (its user
    was deleted, and this row came back from an earlier backup) reads as empty."""
    key = f"{row[1]}/{row[0]}"
    content = unseal("messages.content", key, row[4])
    files = unseal("messages.files", key, row[5])
    calls = unseal("messages.tool_calls", key, row[6])
    return (*row[:4], content or "", files, calls, *row[7:])


def to_message(row: Row) -> Message:
    # A sealed value starts with ESC (PREFIX), which no text the store writes in clear
    # starts with in practice; first-character tests keep the unsealed path cheap.
    content, files, calls = row[4], row[5], row[6]
    if (
        (content and content[0] == _SEALED_MARK)
        or (files and files[0] == _SEALED_MARK)
        or (calls and calls[0] == _SEALED_MARK)
    ):
        row = open_message_texts(row)
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
