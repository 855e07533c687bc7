"""The DDL of recall's tables (migrations 5, 25, 30, 31, 32 and 33): the indexed messages,
the keyword index per dialect, and the keyword flush's mark. Rendered like every table of
:mod:`memstrata.storage.tables`."""

from __future__ import annotations

from collections.abc import Callable

from memstrata.sealing import hashed_terms, plain_index_terms
from memstrata.storage.plan import Exec, Op, Query

__all__ = [
    "RECALL_KEYWORDS",
    "RECALL_MARKS",
    "RECALL_TABLES",
    "RECALL_TERMS",
    "RECALL_TOKEN_COUNT",
    "RECALL_WAITING",
    "RECALL_WAITING_BY_SEQ",
]


# Recall (migration 5): one row per indexed message, the owner beside it so searches
# filter without a join, ``embedder`` naming the space its vector was made in (NULL:
# not embedded yet). The keyword index is the one piece that differs per dialect: an
# FTS5 table keyed by the message's seq on SQLite, a tsvector column on PostgreSQL.
RECALL_TABLES = (
    """CREATE TABLE recall_docs (
        seq BIGINT PRIMARY KEY,
        message_id TEXT NOT NULL UNIQUE,
        conversation_id TEXT NOT NULL,
        tenant_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        agent_id TEXT NOT NULL DEFAULT '',
        occurred_at {time} NOT NULL,
        embedder TEXT
    )""",
    "CREATE INDEX recall_docs_owner ON recall_docs (tenant_id, user_id, agent_id)",
    "CREATE INDEX recall_docs_conversation ON recall_docs (conversation_id, embedder)",
)
# Migration 25: only the rows still waiting for a vector (few, normally), so a read finds
# its owner's newest ones and counts them without visiting the embedded rest.
RECALL_WAITING = (
    "CREATE INDEX IF NOT EXISTS recall_docs_waiting ON recall_docs (tenant_id, user_id, agent_id, seq) "
    "WHERE embedder IS NULL"
)
# Migration 30: the same rows keyed by owner and seq, with no agent between them: a read of
# a user's newest waiting rows (any agent) then walks this index alone, where the planner
# took the owner index, read every row of the owner and sorted them (0.4 ms at 1k messages,
# every context and search).
RECALL_WAITING_BY_SEQ = (
    "DROP INDEX IF EXISTS recall_docs_waiting",
    "CREATE INDEX IF NOT EXISTS recall_docs_waiting_seq ON recall_docs "
    "(tenant_id, user_id, seq) WHERE embedder IS NULL",
)
# Migration 31: each row carries its message's token count (a message's text never changes
# once complete, and only complete messages are indexed), so a keyword posting list reads
# the full-text index and this table alone, not the messages beside them (a third of a
# context call at 1k messages was postings and their scoring).
RECALL_TOKEN_COUNT = (
    "ALTER TABLE recall_docs ADD COLUMN token_count INTEGER NOT NULL DEFAULT 0",
    "UPDATE recall_docs SET token_count = "
    "(SELECT m.token_count FROM messages m WHERE m.seq = recall_docs.seq) "
    "WHERE EXISTS (SELECT 1 FROM messages m WHERE m.seq = recall_docs.seq)",
)
# Migration 32 (SQLite): the highest message seq a keyword flush has looked at (see
# recall/keywords.py); the messages above it wait for their recall_docs and full-text rows,
# which a flush writes together. Started at the full-text index's highest rowid, the
# watermark that marked the same before.
RECALL_MARKS = {
    "sqlite": (
        "CREATE TABLE recall_marks (id INTEGER PRIMARY KEY CHECK (id = 1), seq INTEGER NOT NULL)",
        "INSERT INTO recall_marks (id, seq) "
        "SELECT 1, COALESCE((SELECT max(rowid) FROM recall_fts), 0)",
    ),
    "postgres": (),
}
RECALL_KEYWORDS = {
    "sqlite": (
        # owner is a per-user token, so MATCH narrows to one user inside the index.
        "CREATE VIRTUAL TABLE recall_fts USING fts5(owner, body, "
        "tokenize = 'porter unicode61 remove_diacritics 2')",
    ),
    "postgres": (
        "ALTER TABLE recall_docs ADD COLUMN tsv tsvector",
        "CREATE INDEX recall_docs_tsv ON recall_docs USING GIN (tsv)",
    ),
}


# Migration 33 (SQLite): the keyword index keyed by owner and word. Each token is one word
# of one owner (its stem behind the owner's prefix, or hashed with the owner's term key
# when sealing: see memstrata.sealing), so a search for a word reads that owner's rows
# holding it and nothing else, where the old index matched the owner's token beside each
# word (reading the owner's whole row list for every word). The tokens are made in Python,
# so the index splits them at spaces alone ('ascii'), and it keeps no positions (none is
# read: no phrase, no bm25). The old index's rows are carried over from its stored text.
_TERMS_PER_INSERT = 2_000


def _carry_terms() -> Op[None]:
    after = 0
    while True:
        rows = yield Query(
            "SELECT f.rowid, d.tenant_id, d.user_id, f.body FROM recall_fts f "
            "JOIN recall_docs d ON d.seq = f.rowid WHERE f.rowid > ? ORDER BY f.rowid LIMIT ?",
            (after, _TERMS_PER_INSERT),
        )
        if not rows:
            return
        values: list[object] = []
        for seq, tenant, user, body in rows:
            # A sealed row's tokens are its owner's already; a plain row holds the text.
            sealed = hashed_terms(body)
            values += (seq, body if sealed else plain_index_terms(tenant, user, body))
        yield Exec(
            "INSERT INTO recall_terms (rowid, body) VALUES " + ", ".join(["(?, ?)"] * len(rows)),
            values,
        )
        after = int(rows[-1][0])


RECALL_TERMS: dict[str, tuple[str | Callable[[], Op[None]], ...]] = {
    "sqlite": (
        "CREATE VIRTUAL TABLE recall_terms USING fts5(body, tokenize = 'ascii', detail = none)",
        _carry_terms,
        "DROP TABLE recall_fts",
    ),
    "postgres": (),
}
