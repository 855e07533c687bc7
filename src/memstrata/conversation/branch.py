"""One branch of a conversation's message tree: finding its leaf, walking it towards the
root in chunks sized by stored token counts, and its token-budgeted history (sans-IO).

A branch is named by its leaf (default: the conversation's active leaf). The walk reads
about as many rows as a caller keeps, whatever the branch's length. Whether a given
message lies on a branch, without walking it, is :mod:`memstrata.conversation.branches`'
job (ancestry labels).
"""

from __future__ import annotations

import math
from collections.abc import Callable
from operator import itemgetter
from typing import NamedTuple

from memstrata.conversation.conversations import _OWNER, _owner, get_conversation
from memstrata.conversation.history import (
    NO_MESSAGE_CAP,
    History,
    HistoryPlanner,
    check_limits,
    stored_tokens,
)
from memstrata.conversation.lookup import require_message, system_tail
from memstrata.errors import InvalidInput, NotFound
from memstrata.ids import parse_id
from memstrata.runtime import Runtime
from memstrata.storage.parent_hops import parent_hop
from memstrata.storage.plan import Op, Query, Row
from memstrata.storage.records import MESSAGE_COLUMNS, to_message
from memstrata.tokens import Tokenizer, get_tokenizer
from memstrata.types import Message, Role, Scope, Status

__all__ = [
    "Leaf",
    "branch_chunk",
    "history",
    "load_leaf",
    "open_branch",
    "path",
    "resolve_leaf",
    "system_run",
    "token_counter",
    "tokenizer_for",
    "turn_start",
    "walk_branch",
]


class Leaf(NamedTuple):
    """The message a branch ends at, and the last message of its leading system run."""

    message: Message
    system_tail_id: str | None


def load_leaf(conversation_id: str, message_id: str, what: str = "leaf") -> Op[Leaf]:
    """The leaf named ``message_id`` (NotFound, ``kind=what``, when there is none)."""
    row = yield from require_message(conversation_id, message_id, what)
    return Leaf(to_message(row), system_tail(row))


_PREFIXED = ", ".join(f"m.{c.strip()}" for c in MESSAGE_COLUMNS.split(","))
# Row 0: (0, the conversation's active leaf, the leaf's columns or NULLs); no row when the
# conversation is not the scope's. With the system run, its rows follow, tail first.
# MATERIALIZED: each is one row read once; inlined into the statement's parts (as SQLite
# 3.54 chose), they were read again for each part, ten times the cost.
_OPEN_HEAD = (
    "c(active_leaf_id) AS MATERIALIZED (SELECT active_leaf_id FROM conversations"
    f" WHERE id = ? AND {_OWNER}),"
    f" l AS MATERIALIZED (SELECT {_PREFIXED}, m.parent_seq FROM messages m"
    " WHERE m.conversation_id = ? AND m.id = (SELECT COALESCE(?, active_leaf_id) FROM c))"
)
_OPEN_LEAF = (
    "SELECT 0, c.active_leaf_id, "
    + ", ".join(f"l.{c.strip()}" for c in MESSAGE_COLUMNS.split(","))
    + " FROM c LEFT JOIN l ON 1 = 1"
)
_OPEN_SQL = f"WITH {_OPEN_HEAD} {_OPEN_LEAF}"
_OPEN_WITH_SYSTEM_SQL = (
    f"WITH RECURSIVE {_OPEN_HEAD}, s({MESSAGE_COLUMNS}, n) AS ("
    f" SELECT {_PREFIXED}, 1 FROM messages m"
    " JOIN l ON m.conversation_id = l.conversation_id AND m.id = l.system_tail_id"
    " UNION ALL"
    f" SELECT {_PREFIXED}, s.n + 1 FROM messages m"
    " JOIN s ON m.conversation_id = s.conversation_id AND m.id = s.parent_id"
    f") {_OPEN_LEAF} UNION ALL SELECT n, NULL, {MESSAGE_COLUMNS} FROM s"
)
# Rows come back in that order on SQLite; sorted in Python (a linear pass when they do),
# which costs less there than the statement's own sort did.
_BY_FIRST = itemgetter(0)
_LEAF_AT = 2
_COLS = [c.strip() for c in MESSAGE_COLUMNS.split(",")]
# History in the store's encoding also reads its first walk chunk here, sized as
# ``_next_chunk`` sizes it (room = max_tokens - the system run's tokens; with room, the
# messages that fit plus the one that crosses; without room none: that read stops at the
# newest turn's user message, see _TURN_SQL; never into the system run).
# Rows: (0, 0, active leaf, lim, lo, leaf), then system rows (1, n, ...), walk rows (2, n, ...).
_OPEN_WITH_FIRST_SQL = (
    f"WITH RECURSIVE {_OPEN_HEAD}, s({MESSAGE_COLUMNS}, n) AS ("
    f" SELECT {_PREFIXED}, 1 FROM messages m"
    " JOIN l ON m.conversation_id = l.conversation_id AND m.id = l.system_tail_id"
    " UNION ALL"
    f" SELECT {_PREFIXED}, s.n + 1 FROM messages m"
    " JOIN s ON m.conversation_id = s.conversation_id AND m.id = s.parent_id),"
    " t(bt, cnt) AS (SELECT COALESCE(MAX(m.branch_tokens), 0), COALESCE(MAX(m.depth) + 1, 0)"
    " FROM messages m JOIN l ON m.conversation_id = l.conversation_id"
    " AND m.id = l.system_tail_id),"
    " q(lim, lo, top) AS (SELECT"
    " CASE WHEN CAST(? AS BIGINT) - t.bt > 0 THEN CAST(? AS BIGINT) + 2 ELSE 0 END,"
    " CASE WHEN CAST(? AS BIGINT) - t.bt > 0 THEN l.branch_tokens"
    " - CASE WHEN l.status = 'pending' THEN l.token_count ELSE 0 END"
    " - (CAST(? AS BIGINT) - t.bt) ELSE 0 END,"
    " l.depth - t.cnt + 1 FROM l, t),"
    " p(lim, lo) AS (SELECT CASE WHEN lim < top THEN lim ELSE top END, lo FROM q),"
    # The walk carries keys only, as _WALK_SQL's does, and its rows are joined at the end.
    " w(seq, parent_seq, conversation_id, n) AS (SELECT l.seq, l.parent_seq,"
    " l.conversation_id, 1 FROM l, p WHERE p.lim >= 1"
    " UNION ALL"
    " SELECT m.seq, m.parent_seq, m.conversation_id, w.n + 1 FROM w"
    f" JOIN messages m ON m.seq = {parent_hop('w')} AND m.conversation_id = w.conversation_id"
    " JOIN p ON 1 = 1 WHERE w.n < p.lim AND m.branch_tokens >= p.lo)"
    f" SELECT 0, 0, c.active_leaf_id, p.lim, p.lo, {', '.join(f'l.{c}' for c in _COLS)}"
    " FROM c LEFT JOIN l ON 1 = 1 LEFT JOIN p ON 1 = 1"
    f" UNION ALL SELECT 1, n, NULL, NULL, NULL, {MESSAGE_COLUMNS} FROM s"
    f" UNION ALL SELECT 2, w.n, NULL, NULL, NULL, {_PREFIXED}"
    " FROM w CROSS JOIN messages m WHERE m.seq = w.seq"
)
# Sorted in Python (see _BY_FIRST): the head, the system run, then the walk, each by n.
_BY_PART = itemgetter(0, 1)


def resolve_leaf(scope: Scope, conversation_id: str, leaf_id: str | None = None) -> Op[Leaf | None]:
    """The leaf of the branch a call is about: ``leaf_id``, else the active leaf (None for an
    empty conversation). NotFound when the conversation is not the scope's or has no such message."""
    found = yield from open_branch(scope, conversation_id, leaf_id, with_system=False)
    return None if found is None else found[0]


def open_branch(
    scope: Scope, conversation_id: str, leaf_id: str | None = None, *, with_system: bool = True
) -> Op[tuple[Leaf, list[Message]] | None]:
    """:func:`resolve_leaf` and (``with_system``) :func:`system_run` in one statement: the
    owner check, the leaf and its system run cost one round trip to a networked store."""
    ref, mid = _leaf_ref(leaf_id)
    rows: list[Row] = yield Query(
        _OPEN_WITH_SYSTEM_SQL if with_system else _OPEN_SQL,
        (conversation_id, *_owner(scope), conversation_id, mid),
    )
    rows.sort(key=_BY_FIRST)  # the head (0), then the system run from its tail (1, 2, ...)
    leaf = _head(conversation_id, ref, mid, rows, 1, _LEAF_AT)
    if leaf is None:
        return None
    return leaf, [to_message(r[_LEAF_AT:]) for r in reversed(rows[1:])]


#: A first walk chunk read ahead: its row limit, its lowest ``branch_tokens``, its rows.
FirstChunk = tuple[int, int, list[Row]]


def _open_for_history(
    scope: Scope,
    conversation_id: str,
    leaf_id: str | None,
    max_tokens: int | None,
    max_messages: int | None,
) -> Op[tuple[Leaf, list[Message], FirstChunk | None] | None]:
    """:func:`open_branch` plus the first walk chunk of a history in the store's encoding."""
    ref, mid = _leaf_ref(leaf_id)
    budget = NO_MESSAGE_CAP if max_tokens is None else max_tokens  # None: room always
    cap = NO_MESSAGE_CAP if max_messages is None else max_messages
    rows: list[Row] = yield Query(
        _OPEN_WITH_FIRST_SQL,
        (
            conversation_id,
            *_owner(scope),
            conversation_id,
            mid,
            budget,
            cap,
            budget,
            budget,
        ),
    )
    rows.sort(key=_BY_PART)
    at = _LEAF_AT + 3
    leaf = _head(conversation_id, ref, mid, rows, 2, at)
    if leaf is None:
        return None
    system = [to_message(r[at:]) for r in reversed(rows[1:]) if r[0] == 1]
    walk = [r[at:] for r in rows if r[0] == 2]
    first = None if rows[0][3] is None else (int(rows[0][3]), int(rows[0][4]), walk)
    return leaf, system, first


def _leaf_ref(leaf_id: str | None) -> tuple[str | None, str | None]:
    """The leaf as named (None: the active leaf) and its canonical id ("" when malformed:
    it names no message, and the conversation's NotFound must still come first)."""
    ref = leaf_id or None
    try:
        return ref, None if ref is None else parse_id(ref, field="leaf")
    except InvalidInput:
        return ref, ""


def _head(
    conversation_id: str, ref: str | None, mid: str | None, rows: list[Row], active: int, at: int
) -> Leaf | None:
    """The leaf from an opening statement's first row (``active``: where the conversation's
    active leaf sits, ``at``: where the leaf's columns start); None for an empty conversation."""
    if not rows:
        raise NotFound(f"conversation {conversation_id} not found", kind="conversation")
    head = rows[0]
    # No such leaf, or (no ``leaf_id``) an empty conversation.
    if mid == "" or head[at] is None:
        if ref is None and head[active] is None:
            return None
        raise NotFound(f"leaf {ref or head[active]} not found", kind="leaf")
    row = head[at:]
    return Leaf(to_message(row), system_tail(row))


def system_run(conversation_id: str, leaf: Leaf) -> Op[list[Message]]:
    """The branch's leading run of system messages, oldest first (always kept in history)."""
    if leaf.system_tail_id is None:
        return []
    rows = yield from branch_chunk(conversation_id, leaf.system_tail_id, leaf.message.depth + 1)
    return [to_message(r) for r in reversed(rows)]


def tokenizer_for(rt: Runtime, model: str | None) -> Tokenizer:
    """The tokenizer of ``model``; the store's own when it has the same encoding (whose
    counts are stored with each message)."""
    tokenizer = rt.tokenizer if model is None else get_tokenizer(model)
    return rt.tokenizer if tokenizer.name == rt.tokenizer.name else tokenizer


def token_counter(rt: Runtime, tokenizer: Tokenizer) -> Callable[[Message], int]:
    """Counts a message's tokens in ``tokenizer``'s encoding."""
    if tokenizer is rt.tokenizer:
        return stored_tokens
    return lambda m: tokenizer.count_message(m.content, m.tool_calls, m.files)


# Each hop is a lookup by the parent's seq (the primary key), see storage/parent_hops.py.
# The recursion carries only the keys (and what its tests read); the rows are joined
# once at the end. Carrying every column through it, and sorting the result in SQL, cost
# about a quarter more on SQLite (CROSS JOIN keeps the walk the outer loop there). The last
# column is the hop count, for the sort in branch_chunk.
_WALK_SQL = (
    "WITH RECURSIVE b(seq, parent_seq, conversation_id{carry}, n) AS ("
    " SELECT seq, parent_seq, conversation_id{carry}, 1 FROM messages"
    " WHERE id = ? AND conversation_id = ?"
    " UNION ALL"
    " SELECT m.seq, m.parent_seq, m.conversation_id{carry_m}, b.n + 1 FROM b"
    f" JOIN messages m ON m.seq = {parent_hop('b')} AND m.conversation_id = b.conversation_id"
    " WHERE b.n < ?{stop} AND m.branch_tokens >= ?"
    f") SELECT {_PREFIXED}, b.n FROM b CROSS JOIN messages m WHERE m.seq = b.seq"
)
_BRANCH_SQL = _WALK_SQL.format(carry="", carry_m="", stop="")
# The same walk, stopping after the first user message (a turn's start): what a history
# whose newest turn is over budget still needs, read in one statement and no further.
_TURN_SQL = _WALK_SQL.format(
    carry=", role", carry_m=", m.role", stop=f" AND b.role <> '{Role.USER.value}'"
)
_BY_HOPS = itemgetter(-1)


def branch_chunk(
    conversation_id: str,
    start_id: str,
    limit: int,
    min_branch_tokens: int = 0,
    *,
    to_user: bool = False,
) -> Op[list[Row]]:
    """Up to ``limit`` messages from ``start_id`` towards the root, newest first.

    The walk stops below the first ancestor whose ``branch_tokens`` is under
    ``min_branch_tokens`` (that ancestor is left out), so a caller can ask for
    "the messages that fit in N tokens, and the one that crosses N"; with ``to_user``,
    also right after the first user message.
    """
    sql = _TURN_SQL if to_user else _BRANCH_SQL
    params = (start_id, conversation_id, limit, min_branch_tokens)
    rows: list[Row] = yield Query(sql, params)
    rows.sort(key=_BY_HOPS)  # in walk order (as it comes, on SQLite: a linear pass)
    return rows


def path(scope: Scope, conversation_id: str, leaf_id: str | None = None) -> Op[list[Message]]:
    """The whole branch from the root to ``leaf_id`` (default: the active leaf), oldest first."""
    leaf = yield from resolve_leaf(scope, conversation_id, leaf_id)
    if leaf is None:
        return []
    rows = yield from branch_chunk(conversation_id, leaf.message.id, leaf.message.depth + 1)
    return [to_message(r) for r in reversed(rows)]


def _next_chunk(
    planner: HistoryPlanner, start_branch_tokens: int, ratio: float
) -> tuple[int, int, bool]:
    """How many rows to read next, the lowest ``branch_tokens`` worth reading, and
    whether the read is a blind one (up to the open turn's user message).

    While the budget has room, read the rows that fit plus the one that crosses
    the limit: ``branch_tokens`` make that exact in the store's encoding
    (``ratio`` 1) and a close guess in another (``ratio`` = model tokens per
    stored token seen so far). Once the newest turn alone is over budget it is
    still kept whole, so read on to its user message (one statement stopping there).
    """
    left = planner.messages_left
    room = planner.tokens_left
    if planner.kept_any or (left > 0 and (room is None or room > 0)):
        floor = 0 if room is None else start_branch_tokens - math.floor(max(room, 0) / ratio)
        return max(left, 0) + 2, floor, False
    return _TURN_CHUNK, 0, True


#: Most rows one read to the open turn's user message takes (a longer turn: another read).
_TURN_CHUNK = 1024
#: Body messages counted in another encoding before their tokens-per-stored-token ratio is
#: trusted to size a read that could be larger than with a ratio of 1.
RATIO_SAMPLE = 8


def walk_branch(
    rt: Runtime,
    conversation_id: str,
    leaf: Message,
    system: list[Message],
    planner: HistoryPlanner,
    tokenizer: Tokenizer,
    *,
    floor_depth: int = 0,
    first: FirstChunk | None = None,
) -> Op[int]:
    """Feed ``planner`` the branch from ``leaf`` towards the root, newest first, above
    ``floor_depth`` and the system run (already loaded), until it has what it needs.

    Chunks are sized from the stored cumulative branch tokens (scaled by the ratio seen so
    far when counting in another encoding), so about as many rows are read as kept.
    ``first``, a chunk read ahead, stands for the first read when it is the one asked for.
    Returns the rows read; the planner is finished when the walk ends.
    """
    count = token_counter(rt, tokenizer)
    exact = tokenizer is rt.tokenizer
    seen_model = count(leaf) + sum(count(m) for m in system)
    seen_store = leaf.token_count + sum(m.token_count for m in system)
    # A pending leaf is skipped, so its placeholder tokens take no room.
    pending = leaf.token_count if leaf.status is Status.PENDING else 0
    start_id, start_bt, start_depth = leaf.id, leaf.branch_tokens - pending, leaf.depth
    floor = max(floor_depth, len(system))
    rows_read = 0
    sampled = 0  # body messages counted in the model's encoding so far
    while start_depth >= floor:
        ratio = 1.0 if exact else max(seen_model / max(seen_store, 1), 0.1)
        if not exact and sampled < RATIO_SAMPLE:
            # A ratio from the leaf alone (one short message) can be far below the
            # branch's; reading as if a model token cost at least a stored one reads
            # fewer rows, never more, until a sample of the branch has been counted.
            ratio = max(ratio, 1.0)
        limit, min_bt, blind = _next_chunk(planner, start_bt, ratio)
        limit = min(limit, start_depth - floor + 1)
        if (
            first is not None
            and not blind
            and (first[0], max(first[1], 0)) == (limit, max(min_bt, 0))
        ):
            rows = first[2]
        else:
            rows = yield from branch_chunk(conversation_id, start_id, limit, min_bt, to_user=blind)
        first = None
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
            sampled += len(batch)
        start_id = last.parent_id
        start_bt, start_depth = last.branch_tokens - last.token_count, last.depth - 1
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
    message = (yield from load_leaf(conversation_id, before, "before")).message
    opener = yield from turn_start(conversation_id, message)
    return (opener or message).parent_id, message.id


def _check_on_branch(conversation_id: str, leaf_id: str, before: str) -> Op[None]:
    """InvalidInput unless ``before`` is ``leaf_id`` or one of its ancestors."""
    leaf = (yield from load_leaf(conversation_id, leaf_id)).message
    held = (yield from load_leaf(conversation_id, before, "before")).message
    gap = leaf.depth - held.depth
    if gap >= 0:
        rows = yield from branch_chunk(conversation_id, leaf.id, gap + 1)
        if rows and to_message(rows[-1]).id == held.id:
            return
    raise InvalidInput(
        f"before {before} is not on the branch of leaf_id {leaf_id}: give a message of "
        "that branch, or only one of them",
        field="before",
    )


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
    read_ahead: bool = False,
) -> Op[History]:
    """Token-budgeted history of one branch; reads about as many rows as it returns.

    ``before`` (a message id) ends the history just before that message's turn, on its
    branch: Dify builds a prompt as ``[*history, query]``, so the history of the turn
    being answered must not hold its own question. With ``leaf_id`` too, ``before`` must
    lie on that leaf's branch (the two then agree on the branch; else InvalidInput).

    ``read_ahead`` reads the first walk chunk in the opening statement (when counting in
    the store's encoding): one round trip fewer where each statement crosses a network;
    on SQLite the wider statement costs more than the call it saves.
    """
    check_limits(max_tokens, max_messages)
    tokenizer = tokenizer_for(rt, model)
    first: FirstChunk | None = None
    if before is None and read_ahead and tokenizer is rt.tokenizer:
        found = yield from _open_for_history(
            scope, conversation_id, leaf_id, max_tokens, max_messages
        )
        leaf, system, first = (None, [], None) if found is None else found
    elif before is None:
        opened = yield from open_branch(scope, conversation_id, leaf_id)
        leaf, system = (None, []) if opened is None else opened
    else:
        yield from get_conversation(scope, conversation_id)
        if leaf_id is not None:
            yield from _check_on_branch(conversation_id, leaf_id, before)
        ref, _ = yield from _leaf_before(conversation_id, before)
        leaf = None if ref is None else (yield from load_leaf(conversation_id, ref))
        system = [] if leaf is None else (yield from system_run(conversation_id, leaf))
    if leaf is None:
        return History(None, [], 0, False, False, tokenizer.name)
    rows_read = 1 + len(system)
    planner = HistoryPlanner(
        system=system,
        max_tokens=max_tokens,
        max_messages=max_messages,
        count=token_counter(rt, tokenizer),
    )
    rows_read += yield from walk_branch(
        rt, conversation_id, leaf.message, system, planner, tokenizer, first=first
    )
    return planner.result(leaf.message.id, tokenizer.name, rows_read)
