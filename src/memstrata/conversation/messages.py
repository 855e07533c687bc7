"""Message operations (sans-IO; see :mod:`memstrata.storage.plan`).

Reached through a conversation the caller's scope owns, so a message id from another
scope is indistinguishable from one that does not exist.
"""

from __future__ import annotations

from memstrata.conversation.branches import label_child, parent_label, record_fork
from memstrata.conversation.conversations import (
    check_metadata,
    get_conversation,
    hold_conversation,
)
from memstrata.conversation.lookup import message_row, require_message, system_tail
from memstrata.conversation.tree import place
from memstrata.errors import Conflict, InvalidInput, NotFound
from memstrata.ids import UUID_NIL, parse_id
from memstrata.runtime import Runtime, page_limit
from memstrata.storage.plan import Exec, Op, Query, Row
from memstrata.storage.records import (
    MESSAGE_COLUMNS,
    check_text,
    dump_json,
    seal_message_texts,
    to_message,
    to_micros,
)
from memstrata.storage.sql import decode_cursor, encode_cursor, seq_cursor
from memstrata.types import (
    Conversation,
    Message,
    MessagePatch,
    NewMessage,
    Page,
    Scope,
    Status,
    dump_files,
    dump_tool_calls,
)

__all__ = [
    "append_message",
    "check_message",
    "delete_message",
    "find_message",
    "get_message",
    "list_leaves",
    "list_messages",
    "newest_leaf",
    "patch_message",
]


def check_message(rt: Runtime, new: NewMessage | MessagePatch) -> None:
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
    check_metadata(rt, new.metadata)


def get_message(scope: Scope, conversation_id: str, message_id: str) -> Op[Message]:
    yield from get_conversation(scope, conversation_id)
    return to_message((yield from require_message(conversation_id, message_id)))


# From the scope's conversations (its owner index) to the message by (conversation, id):
# one index probe per conversation of the scope, never a scan of every message.
_FIND_SQL = (
    "SELECT " + ", ".join(f"m.{c.strip()}" for c in MESSAGE_COLUMNS.split(",")) + " FROM "
    "conversations c JOIN messages m ON m.conversation_id = c.id AND m.id = ? "
    "WHERE c.tenant_id = ? AND c.user_id = ? AND c.agent_id = ? LIMIT 2"
)


def find_message(scope: Scope, message_id: str) -> Op[Message]:
    """A message of the scope by its id alone, for callers that name messages without
    their conversation (n8n's ``deleteMessages``). NotFound for a malformed id, another
    scope's message or none; Conflict when the scope holds that id in two conversations
    (ids are unique per conversation only): name the conversation then."""
    try:
        mid = parse_id(message_id, field="message_id")
    except InvalidInput:
        raise NotFound(f"message {message_id} not found", kind="message") from None
    rows = yield Query(_FIND_SQL, (mid, scope.tenant, scope.user, scope.agent_key))
    if not rows:
        raise NotFound(f"message {message_id} not found", kind="message")
    if len(rows) > 1:
        raise Conflict(
            f"message id {message_id} is used in several of your conversations: "
            "name the conversation"
        )
    return to_message(rows[0])


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
    row = yield from message_row(conversation_id, message_id)
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
        return (yield from require_message(conv.id, conv.active_leaf_id, "parent")), False
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
    return (yield from require_message(conv.id, new.parent_id, "parent")), False


def append_message(
    rt: Runtime, scope: Scope, conversation_id: str, new: NewMessage
) -> Op[tuple[Message, bool]]:
    """Append a message; returns it and whether it was created (False: idempotent replay)."""
    check_message(rt, new)
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
    spot = place(
        parent, None if parent_row is None else system_tail(parent_row), mid, new.role, tokens
    )
    found = None if parent is None else (yield from parent_label(conv.id, parent.id))
    label = label_child(mid, found)
    now = rt.clock()
    occurred = to_micros(new.occurred_at) if new.occurred_at is not None else now
    texts = seal_message_texts(
        conv.tenant,
        conv.user,
        conv.id,
        mid,
        new.content,
        dump_json(dump_files(new.files)),
        dump_json(dump_tool_calls(new.tool_calls)),
        dump_json(new.metadata),
    )
    yield Exec(
        "INSERT INTO messages (id, conversation_id, parent_id, role, content, files, tool_calls, "
        "tool_call_id, status, metadata, occurred_at, created_at, depth, token_count, "
        "branch_tokens, system_tail_id, legacy_parent, chain_id, parent_seq, position) "
        "VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?, "
        "(SELECT last_position + 1 FROM conversations WHERE id = ?))",
        (
            mid,
            conv.id,
            None if parent is None else parent.id,
            new.role.value,
            *texts[:3],
            new.tool_call_id,
            new.status.value,
            texts[3],
            occurred,
            now,
            spot.depth,
            tokens,
            spot.branch_tokens,
            spot.system_tail_id,
            int(legacy),
            label.chain_id,
            None if parent is None else parent.seq,
            conv.id,
        ),
    )
    yield from record_fork(conv.id, mid, label)
    yield Exec(
        "UPDATE conversations SET active_leaf_id = ?, message_count = message_count + 1, "
        "last_position = last_position + 1, updated_at = ? WHERE id = ?",
        (mid, now, conv.id),
    )
    if conv.active_leaf_id is not None and (parent is None or parent.id != conv.active_leaf_id):
        # A regeneration, an edit or a new root: the old leaf left the active branch.
        for moved in rt.on_branch_change:
            yield from moved(scope, conv.id)
    row = yield from require_message(conv.id, mid)
    message = to_message(row)
    if message.status is Status.COMPLETE:
        for hook in rt.on_message:
            yield from hook(scope, message)
    return message, True


def patch_message(
    rt: Runtime, scope: Scope, conversation_id: str, message_id: str, patch: MessagePatch
) -> Op[Message]:
    """Complete a pending message: the only change a stored message accepts."""
    check_message(rt, patch)
    # The conversation row first, exclusively: concurrent completions queue, and each
    # reads the status only once the one before it has committed.
    conv = yield from hold_conversation(scope, conversation_id, exclusive=True)
    stored = to_message((yield from require_message(conversation_id, message_id)))
    if stored.status is not Status.PENDING:
        raise Conflict(f"message {message_id} is complete; only pending messages can change")
    calls = patch.tool_calls if patch.tool_calls is not None else list(stored.tool_calls)
    files = patch.files if patch.files is not None else list(stored.files)
    tokens = rt.tokenizer.count_message(patch.content, calls, files)
    # A pending message has no children, so only its own branch total moves.
    branch = stored.branch_tokens - stored.token_count + tokens
    sealed = seal_message_texts(
        conv.tenant,
        conv.user,
        conversation_id,
        stored.id,
        patch.content,
        dump_json(dump_files(files)),
        dump_json(dump_tool_calls(calls)),
        dump_json(patch.metadata if patch.metadata is not None else stored.metadata),
    )
    n = yield Exec(
        "UPDATE messages SET content = ?, status = ?, files = ?, tool_calls = ?, metadata = ?, "
        "token_count = ?, branch_tokens = ? WHERE id = ? AND conversation_id = ? AND status = ?",
        (
            *sealed[:1],
            Status.COMPLETE.value,
            *sealed[1:],
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
    completed = to_message((yield from require_message(conversation_id, message_id)))
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
    target = to_message((yield from require_message(conversation_id, message_id)))
    rows = yield Query(_SUBTREE_SQL, (target.id, conversation_id, conversation_id))
    ids = [str(r[0]) for r in rows]
    yield from rt.cascade.delete_messages(conversation_id, ids)
    leaf = conv.active_leaf_id
    if leaf in ids:
        leaf = target.parent_id
        if leaf is None:
            leaf = yield from newest_leaf(conversation_id)
    yield Exec(
        "UPDATE conversations SET active_leaf_id = ?, message_count = message_count - ?, "
        "updated_at = ? WHERE id = ?",
        (leaf, len(ids), rt.clock(), conversation_id),
    )
    for moved in rt.on_branch_change:
        yield from moved(scope, conversation_id)
    return len(ids)


def newest_leaf(conversation_id: str) -> Op[str | None]:
    """The most recently appended message with no children (None: no message left)."""
    newest = yield Query(
        "SELECT id FROM messages m WHERE conversation_id = ? AND NOT EXISTS "
        "(SELECT 1 FROM messages c WHERE c.conversation_id = m.conversation_id "
        "AND c.parent_id = m.id) ORDER BY seq DESC LIMIT 1",
        (conversation_id,),
    )
    return str(newest[0][0]) if newest else None


def _page_start(cursor: str | None) -> tuple[str, int]:
    """Where a page of a conversation's messages starts: after a position (``p<n>``, the
    cursors issued now: a position tells nothing of other conversations), or after a seq
    (cursors issued before positions existed, still honoured)."""
    value = decode_cursor(cursor)
    if value is not None and value.startswith("p"):
        return "position", seq_cursor(encode_cursor(value[1:])) or 0
    return "seq", seq_cursor(cursor) or 0


def _next_cursor(items: list[Message]) -> str:
    return encode_cursor(f"p{items[-1].position}")


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
    column, after = _page_start(cursor)
    rows = yield Query(
        f"SELECT {MESSAGE_COLUMNS} FROM messages m WHERE conversation_id = ? AND {column} > ? "
        "AND NOT EXISTS (SELECT 1 FROM messages c WHERE c.conversation_id = m.conversation_id "
        f"AND c.parent_id = m.id) ORDER BY {column} LIMIT ?",
        (conversation_id, after, n + 1),
    )
    items = [to_message(r) for r in rows[:n]]
    return Page(items, _next_cursor(items) if len(rows) > n else None)


def list_messages(
    rt: Runtime,
    scope: Scope,
    conversation_id: str,
    *,
    limit: int | None = None,
    cursor: str | None = None,
) -> Op[Page[Message]]:
    """Every message of the conversation, every branch, oldest first (server order: ``seq``,
    and so ``position`` within the conversation).

    A parent always comes before its children, so a client can rebuild the whole tree
    page by page, attaching each message to one it has already seen.
    """
    n = page_limit(rt, limit)
    yield from get_conversation(scope, conversation_id)
    column, after = _page_start(cursor)
    rows = yield Query(
        f"SELECT {MESSAGE_COLUMNS} FROM messages WHERE conversation_id = ? AND {column} > ? "
        f"ORDER BY {column} LIMIT ?",
        (conversation_id, after, n + 1),
    )
    items = [to_message(r) for r in rows[:n]]
    return Page(items, _next_cursor(items) if len(rows) > n else None)
