"""Keyword indexing batched across appends on SQLite (sans-IO).

Every FTS5 transaction that inserts rows writes a new index segment at commit and may
merge segments, and every ``recall_docs`` row dirties its table and index pages: per
append, that commit cost as much as the rest of the append. So on SQLite an append writes
nothing to recall, and the ``recall_docs`` and full-text rows of the newest messages are
written together, in one transaction:

- by an append, once its message is :data:`FLUSH_EVERY` or more seqs past the *mark*
  (so the backlog stays small), in that append's transaction;
- by anything that reads ``recall_docs`` or the full-text index (a keyword search, a
  context's recall tier, the read-path and inline embedding, the embedding job, the
  counts of waiting messages), before it reads, when anything waits (read-your-writes: a
  message appended a moment ago is found, whichever process appended it).

The mark (``recall_marks``, migration 32) is the highest message seq a flush has looked
at (it looks back :data:`LOOKBACK` messages at most). The invariant that makes "what
waits" one comparison: every complete message at or below the mark that has something
to index (and was stored with the index on) has both rows, and none above it has a
full-text row (an inline embedding writes the ``recall_docs`` row of its message ahead); the messages themselves are
the durable record of what lies above it (a flush reads them in seq order). New messages
take the highest seq, so they land above the mark; a message at or below it (a pending
message completed after newer ones were flushed) is indexed at once, which leaves the
mark where it is. A backfill flushes what waits first, since one of its older messages
lies below waiting ones. Deleting messages removes their rows from both tables (and the
message rows a later flush would read), so it keeps the invariant too.

PostgreSQL writes its row and ``tsvector`` in the append's transaction as before (one row
and no segment per commit).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memstrata.recall import index as idx
from memstrata.sealing import index_terms
from memstrata.storage.plan import Exec, Op, Query
from memstrata.storage.records import MESSAGE_COLUMNS, to_message
from memstrata.types import Message, Scope

__all__ = [
    "FLUSH_EVERY",
    "deleting",
    "docs_ahead",
    "flush",
    "index_at_append",
    "index_batch",
    "waiting",
    "watermark",
]

#: An append flushes the waiting rows once its seq is this far past the mark (seqs count
#: every message of the store, so the backlog is at most this).
FLUSH_EVERY = 128
#: How far below the newest message a flush looks, at most. With every append indexing,
#: no more than FLUSH_EVERY messages ever wait (the append that reaches it flushes), so
#: this bound only turns away messages stored with ``MEMSTRATA_RECALL_INDEX=false``: as
#: before, they are left to ``memstrata reindex`` (a backfill; those among the newest
#: LOOKBACK when an indexing process flushes are indexed by it), and no append or read
#: has to index a whole store's worth of them in its transaction.
LOOKBACK = 2 * FLUSH_EVERY
#: Rows per multi-row INSERT (8 parameters each for recall_docs, 2 for the full-text rows).
_ROWS_PER_INSERT = 100


def watermark() -> Op[int]:
    """The mark: the highest message seq a flush has looked at (0 before the first)."""
    rows = yield Query("SELECT seq FROM recall_marks WHERE id = 1")
    return int(rows[0][0]) if rows else 0


def waiting() -> Op[bool]:
    """True when messages lie above the mark, not looked at yet (SQLite)."""
    rows = yield Query(
        "SELECT (SELECT max(seq) FROM messages), (SELECT seq FROM recall_marks WHERE id = 1)"
    )
    newest, mark = rows[0]
    return newest is not None and int(newest) > int(mark or 0)


def flush(after: int | None = None) -> Op[int]:
    """Index every message above the mark (or above ``after``, the mark the caller just
    read; :data:`LOOKBACK` at most) that has something to index, oldest first, and move
    the mark past them all (one index read when none waits). Returns how many."""
    mark = (yield from watermark()) if after is None else after
    # The newest seq, complete or not: a pending message the flush passes is indexed when
    # completed (it is then below the mark).
    newest = yield Query("SELECT max(seq) FROM messages")
    top = newest[0][0]
    if top is None or int(top) <= mark:
        return 0
    cols = ", ".join(f"m.{c.strip()}" for c in MESSAGE_COLUMNS.split(","))
    rows = yield Query(
        f"SELECT {cols}, c.tenant_id, c.user_id, c.agent_id FROM messages m "
        "JOIN conversations c ON c.id = m.conversation_id WHERE m.seq > ? "
        "AND m.status = 'complete' ORDER BY m.seq",
        (max(mark, int(top) - LOOKBACK),),
    )
    docs: list[Any] = []
    terms: list[Any] = []
    for r in rows:
        message = to_message(r[:-3])
        owner = Scope(r[-3], r[-2], r[-1] or None)
        doc = idx.doc_row(owner, message)
        if doc is None:
            continue
        row, text = doc
        docs += row
        # The owner's words (hashed when sealing).
        terms += (message.seq, index_terms(owner.tenant, owner.user, text, owner_tokens=True))
    # A row may exist already (written ahead by an inline embedding, or before migration
    # 32 by an append): kept as it is.
    yield from _insert(
        f"INSERT INTO recall_docs ({idx.DOC_COLUMNS}) VALUES ", 8, docs, " ON CONFLICT DO NOTHING"
    )
    yield from _insert("INSERT INTO recall_terms (rowid, body) VALUES ", 2, terms)
    yield Exec("UPDATE recall_marks SET seq = ? WHERE id = 1", (int(top),))
    return len(terms) // 2


def docs_ahead(docs: Sequence[tuple[Scope, Message]]) -> Op[None]:
    """Write the ``recall_docs`` rows of ``docs`` now (an inline embedding marks them),
    their keywords left to the next flush, which keeps a row it finds."""
    values: list[Any] = []
    for owner, message in docs:
        doc = idx.doc_row(owner, message)
        if doc is not None:
            values += doc[0]
    yield from _insert(
        f"INSERT INTO recall_docs ({idx.DOC_COLUMNS}) VALUES ", 8, values, " ON CONFLICT DO NOTHING"
    )


def deleting(flush_first: bool, step: Op[None]) -> Op[None]:
    """A cascade step deleting recall rows; ``flush_first`` (SQLite, indexing on): after
    writing what waits, so a deletion, and its receipt's counts, meet the same rows as on
    PostgreSQL."""
    if flush_first:
        yield from flush()
    yield from step


def _insert(head: str, width: int, values: Sequence[Any], tail: str = "") -> Op[None]:
    step = width * _ROWS_PER_INSERT
    one = "(" + ", ".join("?" * width) + ")"
    for start in range(0, len(values), step):
        chunk = values[start : start + step]
        yield Exec(head + ", ".join([one] * (len(chunk) // width)) + tail, chunk)


def index_at_append(dialect: str, owner: Scope, message: Message) -> Op[bool]:
    """Index a message the append just stored (see the module docstring): False when it
    has nothing to index or was indexed already."""
    if dialect != "sqlite":
        return (yield from idx.index_message(dialect, owner, message))
    mark = yield from watermark()
    if message.seq <= mark:
        # At or below the mark a flush would never read it again: index it now (the mark
        # does not move, so the messages above it still wait).
        return (yield from idx.index_message(dialect, owner, message))
    if message.seq - mark >= FLUSH_EVERY:
        yield from flush(mark)
    return idx.indexable(message)


def index_batch(dialect: str, batch: Sequence[tuple[Message, Scope]]) -> Op[int]:
    """Index older messages (a backfill) at once, after flushing what waits (one of them
    may lie above waiting rows: it would move the watermark past them)."""
    if dialect == "sqlite":
        yield from flush()
    return (yield from idx.index_many(dialect, batch))
