"""Column lists and row mappers shared by every SQL backend."""

from __future__ import annotations

import json
from dataclasses import fields
from typing import Any

from memstrata import strictjson
from memstrata.errors import InvalidInput
from memstrata.instants import from_micros, to_micros
from memstrata.sealing import PREFIX, is_sealed, opener, seal, unseal
from memstrata.storage.plan import Row
from memstrata.types import Conversation, FileRef, Message, Role, Status, ToolCall

__all__ = [
    "CONVERSATION_COLUMNS",
    "MESSAGE_COLUMNS",
    "check_text",
    "dump_json",
    "from_micros",
    "load_json",
    "seal_conversation_texts",
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


def dump_json(value: Any) -> str | None:
    """Empty containers are stored as NULL: most rows have none, and NULL costs nothing to read."""
    if not value:
        return None
    # Strict: NaN, Infinity or a lone surrogate is refused (InvalidInput), never stored.
    return strictjson.dumps(value, separators=(",", ":"), ensure_ascii=False, sort_keys=True)


def load_json(value: str | None, empty: Any) -> Any:
    return empty if value is None else json.loads(value)


#: The message columns sealed with the owner's key (encryption at rest): what the user
#: said and attached, and the metadata a client gave (a speaker's name, say). Role,
#: status, ids, times and counts stay in clear.
_SEALED_MESSAGE = tuple(f"messages.{c}" for c in ("content", "files", "tool_calls", "metadata"))
_CONTENT, _FILES, _CALLS, _META = _SEALED_MESSAGE
_SEALED_MARK = PREFIX[0]


def seal_message_texts(
    tenant: str, user: str, conversation_id: str, message_id: str, *values: str | None
) -> list[str | None]:
    """``content, files, tool_calls, metadata`` as stored: sealed for the conversation's
    owner, bound to this message (as they are when encryption is off)."""
    row = f"{conversation_id}/{message_id}"
    return [
        seal(column, row, tenant, user, value)
        for column, value in zip(_SEALED_MESSAGE, values, strict=True)
    ]


def _open_row(row: Row) -> tuple[str, str | None, str | None, str | None]:
    """A message row's sealed columns opened (content "" and the rest None once its key is
    destroyed), the sealer looked up once for the row."""
    content, files, calls, meta = row[4], row[5], row[6], row[9]
    if not any(map(is_sealed, (content, files, calls, meta))):
        # Only a first ESC, as clear text may start (a terminal's colour codes): no seal, so
        # no sealer either (with encryption off, asking for one is an error).
        return content or "", files, calls, meta
    open_, at = opener(), f"{row[1]}/{row[0]}"
    return (
        (content and open_(_CONTENT, at, content)) or "",
        files and open_(_FILES, at, files),
        calls and open_(_CALLS, at, calls),
        meta and open_(_META, at, meta),
    )


class _Unfrozen:
    """:class:`Message`'s slots, in its order, without its frozen ``__setattr__``."""

    __slots__ = tuple(f.name for f in fields(Message))


# A frozen dataclass's __init__ sets each field through object.__setattr__ by name; a stored
# row fills an _Unfrozen with plain attribute stores and then becomes the Message it is laid
# out as (the same object, about 40% less time than setting each slot through its
# descriptor: this runs for every row a history or context read returns). Its seq is never
# 0, so __post_init__'s fallback to the position has nothing to do.
_NEW = object.__new__
_BECOME = object.__setattr__
_BECOME(_NEW(_Unfrozen), "__class__", Message)  # TypeError here if the layouts ever differ
if len(fields(Message)) != 17:  # a new field must be set here too
    raise RuntimeError("to_message sets 17 fields of Message; it has another number now")


def to_message(row: Row) -> Message:
    """The one place a stored message row (``MESSAGE_COLUMNS``) becomes a ``Message``."""
    # A sealed value starts with ESC (PREFIX): first-character tests keep the unsealed path
    # cheap, and _open_row tells a clear text that starts with ESC by the whole prefix.
    content, files, calls, meta = row[4], row[5], row[6], row[9]
    if (
        (content and content[0] == _SEALED_MARK)
        or (files and files[0] == _SEALED_MARK)
        or (calls and calls[0] == _SEALED_MARK)
        or (meta and meta[0] == _SEALED_MARK)
    ):
        content, files, calls, meta = _open_row(row)
    m: Any = _NEW(_Unfrozen)
    m.id = row[0]
    m.conversation_id = row[1]
    m.parent_id = row[2]
    m.role = _ROLES[row[3]]
    m.content = content
    m.files = () if files is None else tuple(map(FileRef.model_validate, json.loads(files)))
    m.tool_calls = () if calls is None else tuple(map(ToolCall.model_validate, json.loads(calls)))
    m.tool_call_id = row[7]
    m.status = _STATUSES[row[8]]
    m.metadata = {} if not meta else json.loads(meta)
    # The stored microseconds (an int from every driver): Message builds each datetime
    # when it is first read.
    occurred, created = row[10], row[11]
    m.occurred_at = occurred if type(occurred) is int else from_micros(occurred)
    m.created_at = created if type(created) is int else from_micros(created)
    m.seq = row[12]
    m.depth = row[13]
    m.token_count = row[14]
    m.branch_tokens = row[15]
    m.position = row[17] or 0  # row[16] is system_tail_id
    _BECOME(m, "__class__", Message)
    message: Message = m
    return message


def seal_conversation_texts(
    tenant: str, user: str, conversation_id: str, title: str | None, metadata: str | None
) -> tuple[str | None, str | None]:
    """A conversation's title and metadata (JSON text) as stored: sealed for its owner,
    bound to the conversation (as they are when encryption is off)."""
    return (
        seal("conversations.title", conversation_id, tenant, user, title),
        seal("conversations.metadata", conversation_id, tenant, user, metadata),
    )


def to_conversation(row: Row) -> Conversation:
    """A conversation from a row of ``CONVERSATION_COLUMNS``; a title or metadata whose
    owner's key was destroyed reads as none."""
    title, meta = row[4], row[5]
    if title and title[0] == _SEALED_MARK:
        title = unseal("conversations.title", row[0], title)
    if meta and meta[0] == _SEALED_MARK:
        meta = unseal("conversations.metadata", row[0], meta)
    return Conversation(
        id=row[0],
        tenant=row[1],
        user=row[2],
        agent=row[3] or None,
        title=title,
        metadata={} if not meta else json.loads(meta),
        active_leaf_id=row[6],
        created_at=from_micros(row[7]),
        updated_at=from_micros(row[8]),
        message_count=row[9],
    )
