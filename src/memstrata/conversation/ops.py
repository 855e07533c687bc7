"""Conversation and message operations (sans-IO; see :mod:`memstrata.storage.plan`).

Every operation takes the caller's :class:`~memstrata.types.Scope` and checks
ownership through the conversation row, so a message id from another scope is
indistinguishable from one that does not exist.
"""

from __future__ import annotations

import json
import math
from collections.abc import Callable
from datetime import datetime
from typing import Any

from memstrata.conversation.branches import CHAIN_SQL
from memstrata.conversation.history import History, HistoryPlanner, check_limits
from memstrata.conversation.tree import place
from memstrata.errors import Conflict, InvalidInput, NotFound
from memstrata.ids import UUID_NIL, parse_id
from memstrata.runtime import Runtime
from memstrata.storage import tenancy
from memstrata.storage.plan import Exec, Op, Query, Row
from memstrata.storage.records import (
    CONVERSATION_COLUMNS,
    MESSAGE_COLUMNS,
    check_text,
    dump_json,
    to_conversation,
    to_message,
    to_micros,
)
from memstrata.storage.sql import decode_cursor, encode_cursor, seq_cursor
from memstrata.tokens import Tokenizer, get_tokenizer
from memstrata.types import (
    Conversation,
    Message,
    MessagePatch,
    NewMessage,
    Page,
    Role,
    Scope,
    Status,
    dump_files,
    dump_tool_calls,
)

__all__ = [
    "append_message",
    "create_conversation",
    "delete_conversation",
    "delete_message",
    "delete_user",
    "get_conversation",
    "get_message",
    "history",
    "hold_conversation",
    "list_conversations",
    "list_leaves",
    "list_messages",
    "list_users",
    "patch_message",
    "path",
    "turn_start",
    "update_conversation",
]

_OWNER = "tenant_id = ? AND user_id = ? AND agent_id = ?"


def _owner(scope: Scope) -> tuple[str, str, str]:
    return (scope.tenant, scope.user, scope.agent_key)


# -- paging ----------------------------------------------------------------------------------


def page_limit(rt: Runtime, limit: int | None) -> int:
    if limit is None:
        return rt.limits.page_size
    if not 1 <= limit <= rt.limits.max_page_size:
        raise InvalidInput(f"limit must be between 1 and {rt.limits.max_page_size}", field="limit")
    return limit


# -- validation ------------------------------------------------------------------------------


def _check_metadata(rt: Runtime, metadata: dict[str, Any] | None) -> None:
    if metadata and len(json.dumps(metadata, default=str)) > rt.limits.max_metadata_bytes:
        raise InvalidInput(
            f"metadata is over the limit of {rt.limits.max_metadata_bytes} bytes", field="metadata"
        )


def _check_message(rt: Runtime, new: NewMessage | MessagePatch) -> None:
    check_text(new.content, "content")
    if isinstance(new, NewMessage):
        check_text(new.tool_call_id, "tool_call_id")
    size = len(new.content.encode())
    if size > rt.limits.max_content_bytes:
        raise InvalidInput(
            f"content is {size} bytes, over the limit of {rt.limits.max_content_bytes}",
            field="content",
        )
    if new.files is not None and len(new.files) > rt.limits.max_files:
        raise InvalidInput(f"at most {rt.limits.max_files} files per message", field="files")
    if new.tool_calls is not None and len(new.tool_calls) > rt.limits.max_tool_calls:
        raise InvalidInput(
            f"at most {rt.limits.max_tool_calls} tool calls per message", field="tool_calls"
        )
    _check_metadata(rt, new.metadata)


# -- conversations ---------------------------------------------------------------------------


def create_conversation(
    rt: Runtime,
    scope: Scope,
    *,
    title: str | None = None,
    metadata: dict[str, Any] | None = None,
    conversation_id: str | None = None,
) -> Op[Conversation]:
    _check_metadata(rt, metadata)
    if title is not None and len(title) > 1000:
        raise InvalidInput("title is over 1000 characters", field="title")
    check_text(title, "title")
    cid = parse_id(conversation_id, field="id") if conversation_id else rt.make_id()
    now = rt.clock()
    yield from tenancy.ensure_user(scope.tenant, scope.user, now)
    try:
        yield Exec(
            "INSERT INTO conversations (id, tenant_id, user_id, agent_id, title, metadata, "
            "created_at, updated_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?)",
            (cid, *_owner(scope), title, dump_json(metadata), now, now),
        )
    except Conflict:
        raise Conflict(f"conversation {cid} already exists") from None
    return (yield from get_conversation(scope, cid))


def get_conversation(scope: Scope, conversation_id: str) -> Op[Conversation]:
    rows = yield Query(
        f"SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id = ? AND {_OWNER}",
        (conversation_id, *_owner(scope)),
    )
    if not rows:
        raise NotFound(f"conversation {conversation_id} not found", kind="conversation")
    return to_conversation(rows[0])


def hold_conversation(
    scope: Scope, conversation_id: str, *, exclusive: bool = False
) -> Op[Conversation]:
    """The conversation, its row locked until commit (on PostgreSQL; SQLite's
    BEGIN IMMEDIATE already serialises writers).

    Every write of rows under a conversation starts here, shared (``exclusive``
    for appends and completions, which queue on one conversation so they never
    race for its active leaf), and a delete takes the row exclusively first. So a
    write either commits before the delete reads (and is deleted with it) or waits
    and then finds no conversation (NotFound). A lock, not an UPDATE: a second
    update of a row this transaction already updated re-checks its foreign key,
    which would lock the user row after the conversation, against the lock order.

    Parent locks rather than foreign keys: ``working_memory`` marks a user-wide
    document with an empty conversation id, many derived tables name the
    conversation, and SQLite cannot add a key to a table in place; and rather than
    SERIALIZABLE, which would make every write in the store a retry candidate.
    Lock order: user, then conversation, then the rows under it.
    """
    rows = yield Query(
        f"SELECT {CONVERSATION_COLUMNS} FROM conversations WHERE id = ? AND {_OWNER}",
        (conversation_id, *_owner(scope)),
        lock="update" if exclusive else "share",
    )
    if not rows:
        raise NotFound(f"conversation {conversation_id} not found", kind="conversation")
    return to_conversation(rows[0])


def list_conversations(
    rt: Runtime, scope: Scope, *, limit: int | None = None, cursor: str | None = None
) -> Op[Page[Conversation]]:
    """Newest first."""
    n = page_limit(rt, limit)
    before = seq_cursor(cursor)
    rows = yield Query(
        f"SELECT {CONVERSATION_COLUMNS}, seq FROM conversations WHERE {_OWNER} AND seq < ? "
        "ORDER BY seq DESC LIMIT ?",
        (*_owner(scope), before if before is not None else 2**62, n + 1),
    )
    items = [to_conversation(r) for r in rows[:n]]
    nxt = encode_cursor(rows[n - 1][-1]) if len(rows) > n else None
    return Page(items, nxt)


def update_conversation(
    rt: Runtime,
    scope: Scope,
    conversation_id: str,
    *,
    title: str | None = None,
    metadata: dict[str, Any] | None = None,
    active_leaf_id: str | None = None,
) -> Op[Conversation]:
    """Change the title, the metadata and/or the active leaf, all in one transaction."""
    _check_metadata(rt, metadata)
    check_text(title, "title")
    yield from get_conversation(scope, conversation_id)
    sets: list[str] = []
    params: list[Any] = []
    if title is not None:
        sets.append("title = ?")
        params.append(title)
    if metadata is not None:
        sets.append("metadata = ?")
        params.append(dump_json(metadata))
    if active_leaf_id is not None:
        row = yield from _require_message(conversation_id, active_leaf_id)
        sets.append("active_leaf_id = ?")
        params.append(row[0])
    if sets:
        yield Exec(
            f"UPDATE conversations SET {', '.join(sets)}, updated_at = ? WHERE id = ?",
            (*params, rt.clock(), conversation_id),
        )
    return (yield from get_conversation(scope, conversation_id))


def delete_conversation(rt: Runtime, scope: Scope, conversation_id: str) -> Op[None]:
    # Exclusive first: writes in flight under it finish (and are deleted), later ones
    # wait and then find it gone (see hold_conversation).
    yield from hold_conversation(scope, conversation_id, exclusive=True)
    yield from rt.cascade.delete_conversations([conversation_id])


# -- messages --------------------------------------------------------------------------------


def _message_row(conversation_id: str, message_id: str) -> Op[Row | None]:
    rows = yield Query(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE id = ? AND conversation_id = ?",
        (message_id, conversation_id),
    )
    return rows[0] if rows else None


def _require_message(conversation_id: str, message_id: str, what: str = "message") -> Op[Row]:
    try:
        mid = parse_id(message_id, field=what)
    except InvalidInput:
        # A malformed id cannot name a stored message: same answer as a missing one.
        raise NotFound(f"{what} {message_id} not found", kind=what) from None
    row = yield from _message_row(conversation_id, mid)
    if row is None:
        raise NotFound(f"{what} {message_id} not found", kind=what)
    return row


def get_message(scope: Scope, conversation_id: str, message_id: str) -> Op[Message]:
    yield from get_conversation(scope, conversation_id)
    return to_message((yield from _require_message(conversation_id, message_id)))


def _same_message(stored: Message, new: NewMessage) -> bool:
    return (
        stored.role is new.role
        and stored.content == new.content
        and stored.files == tuple(new.files)
        and stored.tool_calls == tuple(new.tool_calls)
        and stored.tool_call_id == new.tool_call_id
        and stored.status is new.status
        and (not new.parent_given or new.parent_id in (stored.parent_id, UUID_NIL))
    )


def _existing(conversation_id: str, message_id: str, new: NewMessage) -> Op[Message | None]:
    """The idempotency check for a client-supplied id: ids are per conversation, so only
    this conversation's messages can answer (never another owner's)."""
    row = yield from _message_row(conversation_id, message_id)
    if row is None:
        return None
    stored = to_message(row)
    if not _same_message(stored, new):
        raise Conflict(f"message {message_id} already exists with other content")
    return stored


def _resolve_parent(conv: Conversation, new: NewMessage) -> Op[tuple[Row | None, bool]]:
    """The parent row and whether the legacy all-zero parent was used."""
    if not new.parent_given:
        if conv.active_leaf_id is None:
            return None, False
        return (yield from _require_message(conv.id, conv.active_leaf_id, "parent")), False
    if new.parent_id is None:
        return None, False
    if new.parent_id == UUID_NIL:
        # No branch information: the message follows the newest one by server order.
        rows = yield Query(
            f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? "
            "ORDER BY seq DESC LIMIT 1",
            (conv.id,),
        )
        return (rows[0] if rows else None), True
    return (yield from _require_message(conv.id, new.parent_id, "parent")), False


def append_message(
    rt: Runtime, scope: Scope, conversation_id: str, new: NewMessage
) -> Op[tuple[Message, bool]]:
    """Append a message; returns it and whether it was created (False: idempotent replay)."""
    _check_message(rt, new)
    mid = parse_id(new.id) if new.id is not None else rt.make_id()
    if new.id is not None:
        # A replay answers from the stored row and writes nothing (not even updated_at).
        yield from get_conversation(scope, conversation_id)
        stored = yield from _existing(conversation_id, mid, new)
        if stored is not None:
            return stored, False
    conv = yield from hold_conversation(scope, conversation_id, exclusive=True)
    if new.id is not None:  # a concurrent append of the same id may have won the lock
        stored = yield from _existing(conv.id, mid, new)
        if stored is not None:
            return stored, False
    parent_row, legacy = yield from _resolve_parent(conv, new)
    parent = None if parent_row is None else to_message(parent_row)
    if parent is not None and parent.status is Status.PENDING:
        raise Conflict(f"message {parent.id} is pending; complete it before replying to it")
    tokens = rt.tokenizer.count_message(new.content, new.tool_calls, new.files)
    spot = place(parent, None if parent_row is None else parent_row[16], mid, new.role, tokens)
    now = rt.clock()
    occurred = to_micros(new.occurred_at) if new.occurred_at is not None else now
    yield Exec(
        "INSERT INTO messages (id, conversation_id, parent_id, role, content, files, tool_calls, "
        "tool_call_id, status, metadata, occurred_at, created_at, depth, token_count, "
        "branch_tokens, system_tail_id, legacy_parent, chain_id) "
        f"VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, {CHAIN_SQL})",
        (
            mid,
            conv.id,
            None if parent is None else parent.id,
            new.role.value,
            new.content,
            dump_json(dump_files(new.files)),
            dump_json(dump_tool_calls(new.tool_calls)),
            new.tool_call_id,
            new.status.value,
            dump_json(new.metadata),
            occurred,
            now,
            spot.depth,
            tokens,
            spot.branch_tokens,
            spot.system_tail_id,
            int(legacy),
            conv.id,
            None if parent is None else parent.id,
            mid,
        ),
    )
    yield Exec(
        "UPDATE conversations SET active_leaf_id = ?, message_count = message_count + 1, "
        "updated_at = ? WHERE id = ?",
        (mid, now, conv.id),
    )
    row = yield from _require_message(conv.id, mid)
    message = to_message(row)
    if message.status is Status.COMPLETE:
        for hook in rt.on_message:
            yield from hook(scope, message)
    return message, True


def patch_message(
    rt: Runtime, scope: Scope, conversation_id: str, message_id: str, patch: MessagePatch
) -> Op[Message]:
    """Complete a pending message: the only change a stored message accepts."""
    _check_message(rt, patch)
    # The conversation row first, exclusively: concurrent completions queue, and each
    # reads the status only once the one before it has committed.
    yield from hold_conversation(scope, conversation_id, exclusive=True)
    stored = to_message((yield from _require_message(conversation_id, message_id)))
    if stored.status is not Status.PENDING:
        raise Conflict(f"message {message_id} is complete; only pending messages can change")
    calls = patch.tool_calls if patch.tool_calls is not None else list(stored.tool_calls)
    files = patch.files if patch.files is not None else list(stored.files)
    tokens = rt.tokenizer.count_message(patch.content, calls, files)
    # A pending message has no children, so only its own branch total moves.
    branch = stored.branch_tokens - stored.token_count + tokens
    n = yield Exec(
        "UPDATE messages SET content = ?, status = ?, files = ?, tool_calls = ?, metadata = ?, "
        "token_count = ?, branch_tokens = ? WHERE id = ? AND conversation_id = ? AND status = ?",
        (
            patch.content,
            Status.COMPLETE.value,
            dump_json(dump_files(files)),
            dump_json(dump_tool_calls(calls)),
            dump_json(patch.metadata if patch.metadata is not None else stored.metadata),
            tokens,
            branch,
            stored.id,
            conversation_id,
            Status.PENDING.value,
        ),
    )
    if not n:  # the status check in the WHERE clause is what decides the one winner
        raise Conflict(f"message {message_id} is complete; only pending messages can change")
    yield Exec(
        "UPDATE conversations SET updated_at = ? WHERE id = ?", (rt.clock(), conversation_id)
    )
    completed = to_message((yield from _require_message(conversation_id, message_id)))
    for hook in rt.on_message:
        yield from hook(scope, completed)
    return completed


_SUBTREE_SQL = (
    "WITH RECURSIVE sub(id) AS ("
    " SELECT id FROM messages WHERE id = ? AND conversation_id = ?"
    " UNION ALL SELECT m.id FROM messages m JOIN sub ON m.parent_id = sub.id"
    " AND m.conversation_id = ?"
    ") SELECT id FROM sub"
)


def delete_message(rt: Runtime, scope: Scope, conversation_id: str, message_id: str) -> Op[int]:
    """Delete a message with everything under it (its replies, their regenerations and
    follow-ups); returns how many messages went.

    The subtree goes, not just the message: re-parenting its children would hand an
    answer to another question and rewrite the stored depth and branch tokens of every
    descendant, while removing the subtree leaves every remaining path exactly as it was.
    The active leaf, when it was in the subtree, moves to the deleted message's parent
    (a deleted root: the newest remaining leaf, or none). Derived data follows through
    the message cascade: summaries covering the messages, their recall entries and
    vectors, and their place in facts' provenance.
    """
    conv = yield from hold_conversation(scope, conversation_id, exclusive=True)
    target = to_message((yield from _require_message(conversation_id, message_id)))
    rows = yield Query(_SUBTREE_SQL, (target.id, conversation_id, conversation_id))
    ids = [str(r[0]) for r in rows]
    yield from rt.cascade.delete_messages(conversation_id, ids)
    leaf = conv.active_leaf_id
    if leaf in ids:
        leaf = target.parent_id
        if leaf is None:
            newest = yield Query(
                "SELECT id FROM messages m WHERE conversation_id = ? AND NOT EXISTS "
                "(SELECT 1 FROM messages c WHERE c.conversation_id = m.conversation_id "
                "AND c.parent_id = m.id) ORDER BY seq DESC LIMIT 1",
                (conversation_id,),
            )
            leaf = str(newest[0][0]) if newest else None
    yield Exec(
        "UPDATE conversations SET active_leaf_id = ?, message_count = message_count - ?, "
        "updated_at = ? WHERE id = ?",
        (leaf, len(ids), rt.clock(), conversation_id),
    )
    return len(ids)


def list_leaves(
    rt: Runtime,
    scope: Scope,
    conversation_id: str,
    *,
    limit: int | None = None,
    cursor: str | None = None,
) -> Op[Page[Message]]:
    """Messages with no children, oldest first."""
    n = page_limit(rt, limit)
    yield from get_conversation(scope, conversation_id)
    after = seq_cursor(cursor) or 0
    rows = yield Query(
        f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE conversation_id = ? AND seq > ? "
        "AND NOT EXISTS (SELECT 1 FROM messages c WHERE c.conversation_id = m.conversation_id "
        "AND c.parent_id = m.id) ORDER BY seq LIMIT ?",
        (conversation_id, after, n + 1),
    )
    items = [to_message(r) for r in rows[:n]]
    return Page(items, encode_cursor(items[-1].seq) if len(rows) > n else None)


def list_messages(
    rt: Runtime,
    scope: Scope,
    conversation_id: str,
    *,
    limit: int | None = None,
    cursor: str | None = None,
) -> Op[Page[Message]]:
    """Every message of the conversation, every branch, oldest first (server order, ``seq``).

    A parent always has a lower ``seq`` than its children, so a client can rebuild the
    whole tree page by page, attaching each message to one it has already seen.
    """
    n = page_limit(rt, limit)
    yield from get_conversation(scope, conversation_id)
    after = seq_cursor(cursor) or 0
    rows = yield Query(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? AND seq > ? "
        "ORDER BY seq LIMIT ?",
        (conversation_id, after, n + 1),
    )
    items = [to_message(r) for r in rows[:n]]
    return Page(items, encode_cursor(items[-1].seq) if len(rows) > n else None)


# -- branch walking --------------------------------------------------------------------------

_BRANCH_SQL = (
    "WITH RECURSIVE b(" + MESSAGE_COLUMNS + ", n) AS ("
    f" SELECT {MESSAGE_COLUMNS}, 1 FROM messages WHERE id = ? AND conversation_id = ?"
    " UNION ALL"
    " SELECT " + ", ".join(f"m.{c.strip()}" for c in MESSAGE_COLUMNS.split(",")) + ", b.n + 1"
    " FROM messages m JOIN b ON m.conversation_id = b.conversation_id AND m.id = b.parent_id"
    " WHERE b.n < ? AND m.branch_tokens >= ?"
    f") SELECT {MESSAGE_COLUMNS} FROM b ORDER BY n"
)


def branch_chunk(
    conversation_id: str, start_id: str, limit: int, min_branch_tokens: int = 0
) -> Op[list[Row]]:
    """Up to ``limit`` messages from ``start_id`` towards the root, newest first.

    The walk stops below the first ancestor whose ``branch_tokens`` is under
    ``min_branch_tokens`` (that ancestor is left out), so a caller can ask for
    "the messages that fit in N tokens, and the one that crosses N".
    """
    rows: list[Row] = yield Query(
        _BRANCH_SQL, (start_id, conversation_id, limit, min_branch_tokens)
    )
    return rows


def path(scope: Scope, conversation_id: str, leaf_id: str | None = None) -> Op[list[Message]]:
    """The whole branch from the root to ``leaf_id`` (default: the active leaf), oldest first."""
    conv = yield from get_conversation(scope, conversation_id)
    leaf = leaf_id or conv.active_leaf_id
    if leaf is None:
        return []
    row = yield from _require_message(conversation_id, leaf, "leaf")
    rows = yield from branch_chunk(conversation_id, row[0], row[13] + 1)
    return [to_message(r) for r in reversed(rows)]


def _counter(rt: Runtime, tokenizer: Tokenizer) -> Callable[[Message], int]:
    if tokenizer is rt.tokenizer:
        return lambda m: m.token_count  # stored at append in the store's encoding
    return lambda m: tokenizer.count_message(m.content, m.tool_calls, m.files)


def _next_chunk(
    planner: HistoryPlanner, start_branch_tokens: int, ratio: float, grow: int
) -> tuple[int, int, bool]:
    """How many rows to read next, the lowest ``branch_tokens`` worth reading, and
    whether the read is a blind one (whose size should grow next time).

    While the budget has room, read the rows that fit plus the one that crosses
    the limit: ``branch_tokens`` make that exact in the store's encoding
    (``ratio`` 1) and a close guess in another (``ratio`` = model tokens per
    stored token seen so far). Once the newest turn alone is over budget it is
    still kept whole, so read on in growing chunks until its user message.
    """
    left = planner.messages_left
    room = planner.tokens_left
    if planner.kept_any or (left > 0 and (room is None or room > 0)):
        floor = 0 if room is None else start_branch_tokens - math.floor(max(room, 0) / ratio)
        return max(left, 0) + 2, floor, False
    return grow, 0, True


def walk_branch(
    rt: Runtime,
    conversation_id: str,
    leaf: Message,
    system: list[Message],
    planner: HistoryPlanner,
    tokenizer: Tokenizer,
    *,
    floor_depth: int = 0,
) -> Op[int]:
    """Feed ``planner`` the branch from ``leaf`` towards the root, newest first, above
    ``floor_depth`` and the system run (already loaded), until it has what it needs.

    Chunks are sized from the stored cumulative branch tokens (scaled by the ratio seen so
    far when counting in another encoding), so about as many rows are read as kept.
    Returns the rows read; the planner is finished when the walk ends.
    """
    count = _counter(rt, tokenizer)
    exact = tokenizer is rt.tokenizer
    seen_model = count(leaf) + sum(count(m) for m in system)
    seen_store = leaf.token_count + sum(m.token_count for m in system)
    # A pending leaf is skipped, so its placeholder tokens take no room.
    pending = leaf.token_count if leaf.status is Status.PENDING else 0
    start_id, start_bt, start_depth = leaf.id, leaf.branch_tokens - pending, leaf.depth
    floor = max(floor_depth, len(system))
    grow = 8
    rows_read = 0
    while start_depth >= floor:
        ratio = 1.0 if exact else max(seen_model / max(seen_store, 1), 0.1)
        limit, min_bt, blind = _next_chunk(planner, start_bt, ratio, grow)
        limit = min(limit, start_depth - floor + 1)
        rows = yield from branch_chunk(conversation_id, start_id, limit, min_bt)
        rows_read += len(rows)
        batch = [to_message(r) for r in rows]
        if planner.feed(batch):
            break
        last = batch[-1] if batch else None
        if last is None or last.parent_id is None or last.depth <= floor:
            break  # reached the start of the body (or the floor)
        if not exact:
            seen_model += sum(count(m) for m in batch)
            seen_store += sum(m.token_count for m in batch)
        start_id = last.parent_id
        start_bt, start_depth = last.branch_tokens - last.token_count, last.depth - 1
        if blind:
            grow = min(grow * 2, 1024)
    planner.finish()
    return rows_read


def turn_start(conversation_id: str, message: Message) -> Op[Message | None]:
    """The user message that opens ``message``'s turn (``message`` itself when it is one);
    None when no user message is at or above it on its branch."""
    if message.role is Role.USER:
        return message
    start: str | None = message.parent_id
    chunk = 4
    while start is not None:
        rows = yield from branch_chunk(conversation_id, start, chunk)
        for m in map(to_message, rows):
            if m.role is Role.USER:
                return m
        if not rows:
            break
        start = to_message(rows[-1]).parent_id
        chunk = min(chunk * 4, 1024)
    return None


def _leaf_before(conversation_id: str, before: str) -> Op[tuple[str | None, str]]:
    """Where history ending before ``before``'s turn ends: the parent of the user message
    opening that turn (None: nothing comes before it). Also returns the resolved id."""
    row = yield from _require_message(conversation_id, before, "before")
    message = to_message(row)
    opener = yield from turn_start(conversation_id, message)
    return (opener or message).parent_id, message.id


def history(
    rt: Runtime,
    scope: Scope,
    conversation_id: str,
    *,
    leaf_id: str | None = None,
    max_tokens: int | None = 2000,
    max_messages: int | None = 500,
    model: str | None = None,
    before: str | None = None,
) -> Op[History]:
    """Token-budgeted history of one branch; reads about as many rows as it returns.

    ``before`` (a message id) ends the history just before that message's turn, on its
    branch: Dify builds a prompt as ``[*history, query]``, so the history of the turn
    being answered must not hold its own question. It cannot be combined with ``leaf_id``.
    """
    check_limits(max_tokens, max_messages)
    if before is not None and leaf_id is not None:
        raise InvalidInput("give leaf_id or before, not both", field="before")
    tokenizer = rt.tokenizer if model is None else get_tokenizer(model)
    if tokenizer.name == rt.tokenizer.name:
        tokenizer = rt.tokenizer
    conv = yield from get_conversation(scope, conversation_id)
    leaf_ref = leaf_id or conv.active_leaf_id
    if before is not None:
        leaf_ref, _ = yield from _leaf_before(conversation_id, before)
    if leaf_ref is None:
        return History(None, [], 0, False, False, tokenizer.name)
    leaf_row = yield from _require_message(conversation_id, leaf_ref, "leaf")
    leaf = to_message(leaf_row)
    rows_read = 1
    system: list[Message] = []
    tail = leaf_row[16]
    if tail is not None:
        tail_rows = yield from branch_chunk(conversation_id, tail, leaf.depth + 1)
        rows_read += len(tail_rows)
        system = [to_message(r) for r in reversed(tail_rows)]
    planner = HistoryPlanner(
        system=system,
        max_tokens=max_tokens,
        max_messages=max_messages,
        count=_counter(rt, tokenizer),
    )
    rows_read += yield from walk_branch(rt, conversation_id, leaf, system, planner, tokenizer)
    return planner.result(leaf.id, tokenizer.name, rows_read)


# -- users (admin) ---------------------------------------------------------------------------


def list_users(
    rt: Runtime, tenant: str, *, limit: int | None = None, cursor: str | None = None
) -> Op[Page[tuple[str, datetime]]]:
    n = page_limit(rt, limit)
    rows = yield from tenancy.list_users(tenant, decode_cursor(cursor), n + 1)
    items = rows[:n]
    return Page(items, encode_cursor(items[-1][0]) if len(rows) > n else None)


def delete_user(rt: Runtime, tenant: str, user: str) -> Op[int]:
    # The user's row exclusively before any read (see tenancy.ensure_user).
    if not (yield from tenancy.lock_user(tenant, user)):
        raise NotFound(f"user {user} not found", kind="user")
    return (yield from rt.cascade.delete_user(tenant, user))
