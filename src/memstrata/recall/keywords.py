"""Keyword indexing batched across appends on SQLite (sans-IO).

Every FTS5 transaction that inserts rows writes a new index segment at commit and may
merge segments: per append, that commit cost as much as the rest of the append. So on
SQLite an append writes only its ``recall_docs`` row, and the full-text rows of the
newest messages are written together, in one transaction:

- by an append, once its message is :data:`FLUSH_EVERY` or more seqs past what the
  full-text index holds (so the backlog stays small), in that append's transaction;
- by a read that searches keywords (``mem.recall.search``, a context's recall tier),
  before it searches, when anything waits (read-your-writes: a message appended a
  moment ago is found, whichever process appended it).

The invariant that makes "what waits" one comparison: the full-text index holds every
``recall_docs`` row whose seq is at or below its own highest rowid (the *watermark*).
New messages take the highest seq, so a deferred row lies above it; a row at or below
it (a pending message completed after newer ones were flushed) is indexed at once, which
leaves the watermark where it is. A backfill flushes what waits first, since one of its
older messages may still lie above a waiting row. Deleting rows removes them from both
tables, so it keeps the invariant too.

PostgreSQL writes its ``tsvector`` in the append's transaction as before (one column
of the row the append already writes; no segment per commit).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from memstrata.recall import index as idx
from memstrata.recall.text import document_text, owner_token
from memstrata.sealing import index_terms
from memstrata.storage.plan import Exec, Op, Query
from memstrata.storage.records import MESSAGE_COLUMNS, to_message
from memstrata.types import Message, Scope

__all__ = ["FLUSH_EVERY", "flush", "index_at_append", "index_batch", "waiting", "watermark"]

#: An append flushes the waiting full-text rows once its seq is this far past the
#: watermark (seqs count every message of the store, so the backlog is at most this).
FLUSH_EVERY = 128
#: Rows per multi-row INSERT (3 parameters each, under SQLite's 999 limit).
_ROWS_PER_INSERT = 100


def watermark() -> Op[int]:
    """The highest rowid of the full-text index (0 when it is empty)."""
    rows = yield Query("SELECT rowid FROM recall_fts ORDER BY rowid DESC LIMIT 1")
    return int(rows[0][0]) if rows else 0


def waiting() -> Op[bool]:
    """True when ``recall_docs`` holds rows the full-text index does not yet (SQLite)."""
    rows = yield Query(
        "SELECT (SELECT max(seq) FROM recall_docs), "
        "(SELECT rowid FROM recall_fts ORDER BY rowid DESC LIMIT 1)"
    )
    newest, mark = rows[0]
    return newest is not None and int(newest) > int(mark or 0)


def flush(after: int | None = None) -> Op[int]:
    """Write the full-text rows of every ``recall_docs`` row above the watermark (or
    above ``after``, the watermark the caller just read), oldest first. Returns how many."""
    mark = (yield from watermark()) if after is None else after
    cols = ", ".join(f"m.{c.strip()}" for c in MESSAGE_COLUMNS.split(","))
    rows = yield Query(
        f"SELECT {cols}, d.tenant_id, d.user_id FROM recall_docs d "
        "JOIN messages m ON m.seq = d.seq WHERE d.seq > ? ORDER BY d.seq",
        (mark,),
    )
    values: list[Any] = []
    for r in rows:
        message = to_message(r[:-2])
        body = index_terms(r[-2], r[-1], document_text(message))  # hashed when sealing
        values += (message.seq, owner_token(r[-2], r[-1]), body)
    yield from _insert(values)
    return len(rows)


def _insert(values: Sequence[Any]) -> Op[None]:
    step = 3 * _ROWS_PER_INSERT
    for start in range(0, len(values), step):
        chunk = values[start : start + step]
        yield Exec(
            "INSERT INTO recall_fts (rowid, owner, body) VALUES "
            + ", ".join(["(?, ?, ?)"] * (len(chunk) // 3)),
            chunk,
        )


def index_at_append(dialect: str, owner: Scope, message: Message) -> Op[bool]:
    """Index a message the append just stored (see the module docstring). False when it
    has nothing to index or was indexed already."""
    if dialect != "sqlite":
        return (yield from idx.index_message(dialect, owner, message))
    mark = yield from watermark()
    if message.seq <= mark:
        # Below the watermark a deferred row would never be flushed: index it now (the
        # watermark does not move, so the rows waiting above it still wait).
        return (yield from idx.index_message(dialect, owner, message))
    added = yield from idx.index_message(dialect, owner, message, keywords=False)
    if added and message.seq - mark >= FLUSH_EVERY:
        yield from flush(mark)
    return added


def index_batch(dialect: str, batch: Sequence[tuple[Message, Scope]]) -> Op[int]:
    """Index older messages (a backfill) at once, after flushing what waits (one of them
    may lie above waiting rows: it would move the watermark past them)."""
    if dialect == "sqlite":
        yield from flush()
    return (yield from idx.index_many(dialect, batch))
