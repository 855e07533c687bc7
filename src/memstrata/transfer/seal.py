"""Sealing a store written before encryption at rest was on (``memstrata encrypt --all``).

Each batch is one transaction: it seals the texts of the next messages in clear (content,
files, tool calls) for their conversation's owner, and rewrites their keyword-index rows
as hashed terms; then the same for facts (text and ``content_key``, with their earlier
versions and history events). Sealed rows are skipped, so an interrupted run is resumed
by running it again. Run with the sealer active (a store opened with encryption on).

What a store held in clear may survive in free database pages and old row versions until
they are reused: run ``VACUUM`` (SQLite) or ``VACUUM FULL`` (PostgreSQL) afterwards.
"""

from __future__ import annotations

from memstrata.errors import ConfigurationError
from memstrata.longterm.rows import seal_fact, stored_key
from memstrata.recall.text import document_text, owner_token
from memstrata.sealing import active, index_terms, is_sealed, seal
from memstrata.storage.plan import Exec, Op, Query
from memstrata.storage.records import MESSAGE_COLUMNS, seal_message_texts, to_message
from memstrata.types import Scope

__all__ = ["merge_keyword_index", "seal_facts", "seal_messages"]

_COLS = ", ".join(f"m.{c.strip()}" for c in MESSAGE_COLUMNS.split(","))


def seal_messages(dialect: str, after_seq: int, limit: int) -> Op[tuple[int, int, int]]:
    """Seal the clear messages among the next ``limit`` after ``after_seq``; returns (the
    last seq read, messages read, messages sealed). Read 0: the store is done."""
    if active() is None:
        raise ConfigurationError("memstrata encrypt needs MEMSTRATA_ENCRYPT_AT_REST=true")
    rows = yield Query(
        f"SELECT m.seq, c.tenant_id, c.user_id, {_COLS} FROM messages m "
        "JOIN conversations c ON c.id = m.conversation_id WHERE m.seq > ? "
        "ORDER BY m.seq LIMIT ?",
        (after_seq, limit),
    )
    sealed = 0
    for r in rows:
        seq, tenant, user, row = int(r[0]), str(r[1]), str(r[2]), r[3:]
        if not any(v and not is_sealed(v) for v in row[4:7]):
            continue
        content, files, calls = seal_message_texts(tenant, user, row[1], row[0], *row[4:7])
        yield Exec(
            "UPDATE messages SET content = ?, files = ?, tool_calls = ? WHERE seq = ?",
            (content, files, calls, seq),
        )
        body = index_terms(tenant, user, document_text(to_message(row)))
        if dialect == "sqlite":
            # Only a row the full-text index already holds is rewritten (one still waiting
            # is flushed later, hashed, by the index itself).
            gone = yield Exec("DELETE FROM recall_fts WHERE rowid = ?", (seq,))
            if gone:
                yield Exec(
                    "INSERT INTO recall_fts (rowid, owner, body) VALUES (?, ?, ?)",
                    (seq, owner_token(tenant, user), body),
                )
        else:
            yield Exec(
                "UPDATE recall_docs SET tsv = to_tsvector('english', ?) "
                "WHERE seq = ? AND tsv IS NOT NULL",
                (body, seq),
            )
        sealed += 1
    last = int(rows[-1][0]) if rows else after_seq
    return last, len(rows), sealed


def seal_facts(after_seq: int, limit: int) -> Op[tuple[int, int, int]]:
    """Seal the clear facts among the next ``limit`` after ``after_seq`` (text and
    ``content_key``), with their version rows and history events; returns (the last seq
    read, facts read, facts sealed). Read 0: the store is done."""
    if active() is None:
        raise ConfigurationError("memstrata encrypt needs MEMSTRATA_ENCRYPT_AT_REST=true")
    rows = yield Query(
        "SELECT seq, id, tenant_id, user_id, content FROM facts WHERE seq > ? ORDER BY seq LIMIT ?",
        (after_seq, limit),
    )
    sealed = 0
    for seq, fact_id, tenant, user, content in rows:
        owner = Scope(tenant, user)
        if not is_sealed(content):
            yield Exec(
                "UPDATE facts SET content = ?, content_key = ? WHERE seq = ?",
                (seal_fact(owner, fact_id, content), stored_key(owner, content), seq),
            )
            sealed += 1
        versions = yield Query(
            "SELECT superseded_at, content FROM fact_versions WHERE id = ?", (fact_id,)
        )
        for at, text in versions:
            if not is_sealed(text):
                yield Exec(
                    "UPDATE fact_versions SET content = ?, content_key = ? "
                    "WHERE id = ? AND superseded_at = ?",
                    (seal_fact(owner, fact_id, text), stored_key(owner, text), fact_id, at),
                )
        events = yield Query(
            "SELECT seq, event, at, content FROM fact_events WHERE fact_id = ?", (fact_id,)
        )
        for event_seq, event, at, text in events:
            if text and not is_sealed(text):
                row = f"{fact_id}/{event}/{at}"
                yield Exec(
                    "UPDATE fact_events SET content = ? WHERE seq = ?",
                    (seal("fact_events.content", row, tenant, user, text), event_seq),
                )
    last = int(rows[-1][0]) if rows else after_seq
    return last, len(rows), sealed


def merge_keyword_index(dialect: str) -> Op[None]:
    """Merge SQLite's full-text segments into one, so the plain terms of rewritten rows
    leave the index (a deleted FTS5 row's terms stay in its segment until a merge)."""
    if dialect == "sqlite":
        yield Exec("INSERT INTO recall_fts (recall_fts) VALUES ('optimize')")
