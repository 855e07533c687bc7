"""Versioned schema migrations, per SQL dialect.

Each migration is applied once, in order, inside a transaction, and recorded in
``schema_migrations``. A migration is never edited after it ships: changes come
as a new version. Times are integer microseconds since the epoch (UTC) so both
dialects compare and index them the same way.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from memstrata.storage.branch_tables import FILL_FORKS, FORK_TABLES
from memstrata.storage.parent_hops import FILL_PARENT_SEQS, PARENT_SEQ_COLUMN
from memstrata.storage.plan import Op
from memstrata.storage.positions import FILL_POSITIONS, POSITION_COLUMNS, RAISE_LAST_POSITION
from memstrata.storage.prefix_tables import PREFIX_TABLES
from memstrata.storage.recall_tables import (
    RECALL_KEYWORDS,
    RECALL_MARKS,
    RECALL_TABLES,
    RECALL_TERMS,
    RECALL_TOKEN_COUNT,
    RECALL_WAITING,
    RECALL_WAITING_BY_SEQ,
)
from memstrata.storage.tables import (
    CORE_TABLES,
    GRAPH_TABLES,
    JOB_TABLES,
    LONGTERM_TABLES,
    NODE_TABLES,
    NODE_TURN_ERASING,
    NODE_TURN_TABLES,
    PROVENANCE_TABLES,
    RECEIPT_TABLES,
    RETENTION_TABLES,
    STATE_TABLES,
    TYPES,
    VECTOR_TABLES,
    VECTORS_BY_MESSAGE,
    WORKER_TABLES,
    render,
)
from memstrata.storage.usage_tables import USAGE_TABLES
from memstrata.storage.vector_versions import VECTOR_VERSIONS
from memstrata.storage.version_tables import FACT_VERSIONS, PROFILE_VERSIONS

__all__ = ["MIGRATIONS", "Migration", "Step"]


#: A migration's step: an SQL statement, or an operation that moves data SQL alone cannot
#: (run in the migration's transaction, like the statements around it).
Step = str | Callable[[], Op[None]]


@dataclass(frozen=True, slots=True)
class Migration:
    version: int
    name: str
    statements: tuple[Step, ...]


# Ancestry labels (migration 10): a message continues its parent's chain when it is the
# parent's first child (lowest seq), else starts its own (see conversation/branches.py).
# Stored messages are labelled here by one walk down from the chain heads.
_CHAIN_LABELS = (
    "ALTER TABLE messages ADD COLUMN chain_id TEXT",
    "CREATE TABLE chain_backfill AS WITH RECURSIVE lab(id, chain_id) AS ("
    " SELECT m.id, m.id FROM messages m WHERE m.parent_id IS NULL OR EXISTS"
    " (SELECT 1 FROM messages s WHERE s.parent_id = m.parent_id AND s.seq < m.seq)"
    " UNION ALL SELECT c.id, lab.chain_id FROM lab JOIN messages c ON c.parent_id = lab.id"
    " WHERE NOT EXISTS (SELECT 1 FROM messages s WHERE s.parent_id = c.parent_id AND s.seq < c.seq))"
    " SELECT id, chain_id FROM lab",
    "CREATE UNIQUE INDEX chain_backfill_id ON chain_backfill (id)",
    "UPDATE messages SET chain_id = "
    "(SELECT b.chain_id FROM chain_backfill b WHERE b.id = messages.id)",
    "DROP TABLE chain_backfill",
)

# Message ids per conversation (migration 14): a message is named by (conversation, id),
# so an id in use elsewhere (any scope) is free here and never answers 409 for another
# owner's message. SQLite cannot change a table's constraints in place, so ``messages``
# and ``recall_docs`` are rebuilt (seq values kept: the keyword index is keyed by them,
# and the AUTOINCREMENT high-water mark is carried over); PostgreSQL swaps constraints.
# Recall's vectors of messages were keyed by the message id alone: they take the
# conversation into their id too (derived pgvector rows are dropped first and copied
# back when the index is next opened).
_MESSAGE_COLUMNS_14 = (
    "seq, id, conversation_id, parent_id, role, content, files, tool_calls, tool_call_id, "
    "status, metadata, occurred_at, created_at, depth, token_count, branch_tokens, "
    "system_tail_id, legacy_parent, chain_id"
)
_RECALL_COLUMNS_14 = (
    "seq, message_id, conversation_id, tenant_id, user_id, agent_id, occurred_at, embedder"
)
_VECTOR_IDS_14 = (
    "UPDATE vectors SET id = conversation_id || '/' || message_id "
    "WHERE message_id IS NOT NULL AND conversation_id IS NOT NULL AND id = message_id"
)
_MESSAGES_KEY_14 = (
    ("id TEXT NOT NULL UNIQUE,", "id TEXT NOT NULL,"),
    (
        "legacy_parent INTEGER NOT NULL DEFAULT 0\n",
        "legacy_parent INTEGER NOT NULL DEFAULT 0,\n        chain_id TEXT,\n"
        "        UNIQUE (conversation_id, id)\n",
    ),
)
_RECALL_KEY_14 = (
    ("message_id TEXT NOT NULL UNIQUE,", "message_id TEXT NOT NULL,"),
    ("embedder TEXT\n", "embedder TEXT,\n        UNIQUE (conversation_id, message_id)\n"),
)


def _rebuilt(ddls: tuple[str, ...], table: str, changes: tuple[tuple[str, str], ...]) -> str:
    """SQLite DDL of ``table``'s replacement, ``<table>_new``: its shipped definition
    (in ``ddls``) with ``changes`` applied (each must apply, so the copy cannot drift)."""
    head = f"CREATE TABLE {table} ("
    (ddl,) = [d for d in ddls if d.startswith(head)]
    out = ddl.replace(head, f"CREATE TABLE {table}_new (", 1)
    for old, new in changes:
        if out.count(old) != 1:
            raise RuntimeError(f"{table}: {old!r} not found once in its definition")
        out = out.replace(old, new)
    return render("sqlite", (out,))[0]


def _recall_docs_rebuilt(changes: tuple[tuple[str, str], ...]) -> tuple[str, ...]:
    """SQLite statements replacing ``recall_docs`` by its definition with ``changes`` (the
    rows and seq values kept, its two indexes made again)."""
    return (
        _rebuilt(RECALL_TABLES, "recall_docs", changes),
        f"INSERT INTO recall_docs_new ({_RECALL_COLUMNS_14}) "
        f"SELECT {_RECALL_COLUMNS_14} FROM recall_docs ORDER BY seq",
        "DROP TABLE recall_docs",
        "ALTER TABLE recall_docs_new RENAME TO recall_docs",
        "CREATE INDEX recall_docs_owner ON recall_docs (tenant_id, user_id, agent_id)",
        "CREATE INDEX recall_docs_conversation ON recall_docs (conversation_id, embedder)",
    )


_MESSAGE_IDS = {
    "sqlite": (
        _rebuilt(CORE_TABLES, "messages", _MESSAGES_KEY_14),
        f"INSERT INTO messages_new ({_MESSAGE_COLUMNS_14}) "
        f"SELECT {_MESSAGE_COLUMNS_14} FROM messages ORDER BY seq",
        "DELETE FROM sqlite_sequence WHERE name = 'messages_new'",
        "INSERT INTO sqlite_sequence (name, seq) "
        "SELECT 'messages_new', seq FROM sqlite_sequence WHERE name = 'messages'",
        "DROP TABLE messages",
        "ALTER TABLE messages_new RENAME TO messages",
        "CREATE INDEX messages_parent ON messages (conversation_id, parent_id)",
        "CREATE INDEX messages_conversation ON messages (conversation_id, seq)",
        *_recall_docs_rebuilt(_RECALL_KEY_14),
        _VECTOR_IDS_14,
    ),
    "postgres": (
        "ALTER TABLE messages DROP CONSTRAINT messages_id_key",
        "ALTER TABLE messages ADD CONSTRAINT messages_conversation_id_id_key "
        "UNIQUE (conversation_id, id)",
        "DROP INDEX messages_parent",
        "CREATE INDEX messages_parent ON messages (conversation_id, parent_id)",
        "ALTER TABLE recall_docs DROP CONSTRAINT recall_docs_message_id_key",
        "ALTER TABLE recall_docs ADD CONSTRAINT recall_docs_conversation_id_message_id_key "
        "UNIQUE (conversation_id, message_id)",
        # The derived index rows point at the old ids; ensure_op copies them back.
        "DO $$ DECLARE t text; BEGIN"
        " FOR t IN SELECT index_table FROM vector_spaces WHERE index_table IS NOT NULL LOOP"
        " IF to_regclass(t) IS NOT NULL THEN"
        " EXECUTE format('DELETE FROM %I p USING vectors v WHERE v.id = p.id"
        " AND v.id = v.message_id AND v.conversation_id IS NOT NULL', t);"
        " END IF; END LOOP; END $$",
        _VECTOR_IDS_14,
    ),
}

_CORE = "core: tenants, users, keys, conversations, messages"

# A leaner recall_docs on SQLite (migration 27): ``seq BIGINT PRIMARY KEY`` kept the key in a
# b-tree of its own beside the table; as ``INTEGER PRIMARY KEY`` it is the rowid, so an
# indexed append writes one b-tree fewer per commit (the keys and indexes are the same,
# and seq values are kept: the full-text rows are keyed by them). PostgreSQL's table is
# unchanged.
_RECALL_ROWID = {
    "sqlite": (
        *_recall_docs_rebuilt(
            (*_RECALL_KEY_14, ("seq BIGINT PRIMARY KEY,", "seq INTEGER PRIMARY KEY,"))
        ),
        RECALL_WAITING,
    ),
    "postgres": (),
}

# Two clocks (migration 15): event time (valid_from, valid_to: when a fact held in the
# world) and system time (recorded_at, superseded_at: when memstrata believed it) on
# facts; event and system start on profile sections (a section is replaced whole, so its
# row is always the current version). Stored rows are backfilled from what is known:
# recorded at creation, superseded when a non-active fact last changed, valid from its
# earliest source message's occurred_at (else its creation), valid until the fact that
# superseded it became valid (never before it began).
_TWO_CLOCKS = {
    dialect: (
        *(
            f"ALTER TABLE facts ADD COLUMN {column} {TYPES[dialect]['time']}"
            for column in ("valid_from", "valid_to", "recorded_at", "superseded_at")
        ),
        *(
            f"ALTER TABLE profile_sections ADD COLUMN {column} {TYPES[dialect]['time']}"
            for column in ("valid_from", "recorded_at")
        ),
        "UPDATE facts SET recorded_at = created_at, "
        "superseded_at = CASE WHEN status = 'active' THEN NULL ELSE updated_at END",
        "UPDATE facts SET valid_from = COALESCE((SELECT min(m.occurred_at) FROM fact_sources s "
        "JOIN messages m ON m.conversation_id = s.conversation_id AND m.id = s.message_id "
        "WHERE s.fact_id = facts.id), created_at)",
        "UPDATE facts SET valid_to = COALESCE((SELECT n.valid_from FROM facts n "
        "WHERE n.id = facts.superseded_by), updated_at) WHERE status IN ('superseded', 'removed')",
        "UPDATE facts SET valid_to = valid_from WHERE valid_to < valid_from",
        "UPDATE profile_sections SET valid_from = updated_at, recorded_at = updated_at",
    )
    for dialect in TYPES
}

MIGRATIONS: dict[str, tuple[Migration, ...]] = {
    dialect: (
        Migration(1, _CORE, render(dialect, CORE_TABLES)),
        Migration(2, "jobs: the durable background queue", render(dialect, JOB_TABLES)),
        Migration(3, "vectors: embeddings for semantic search", render(dialect, VECTOR_TABLES)),
        Migration(
            4,
            "state: working memory, plans, iterations, checkpoints, snapshots, summaries",
            render(dialect, STATE_TABLES),
        ),
        Migration(
            5,
            "recall: keyword index and embedding bookkeeping",
            render(dialect, RECALL_TABLES) + RECALL_KEYWORDS[dialect],
        ),
        Migration(6, "node memories: index of blob generations", render(dialect, NODE_TABLES)),
        Migration(
            7,
            "long-term memory: facts, their sources and history, profiles, extraction log",
            render(dialect, LONGTERM_TABLES),
        ),
        Migration(
            8,
            "jobs: the request id that queued a job (logs follow it); keys: an expiry time",
            (
                "ALTER TABLE jobs ADD COLUMN request_id TEXT",
                f"ALTER TABLE api_keys ADD COLUMN expires_at {TYPES[dialect]['time']}",
            ),
        ),
        Migration(
            9,
            "retention: how long each kind of data is kept, per tenant",
            render(dialect, RETENTION_TABLES),
        ),
        Migration(
            10,
            "messages: ancestry labels (chain_id), so recall keeps to the branch being answered",
            _CHAIN_LABELS,
        ),
        Migration(
            11,
            "node memories: the message ids each generation holds (idempotent turns); "
            "vectors by message (single-message deletes)",
            (*render(dialect, NODE_TURN_TABLES), VECTORS_BY_MESSAGE),
        ),
        Migration(
            12,
            "graphs: LangGraph checkpoints, pending writes and store items",
            render(dialect, GRAPH_TABLES),
        ),
        Migration(
            13,
            "workers: heartbeats, so due jobs without a running worker are reported",
            render(dialect, WORKER_TABLES),
        ),
        Migration(
            14,
            "messages: ids unique per conversation (an id used elsewhere is free here)",
            _MESSAGE_IDS[dialect],
        ),
        Migration(
            15,
            "two clocks: event time (valid_from, valid_to) and system time (recorded_at, "
            "superseded_at) on facts and profile sections",
            _TWO_CLOCKS[dialect],
        ),
        Migration(
            16,
            "provenance: recorded context assemblies and the ids of what they injected",
            render(dialect, PROVENANCE_TABLES),
        ),
        Migration(
            17,
            "usage: model calls per owner and purpose, daily totals, per-tenant budgets",
            render(dialect, USAGE_TABLES),
        ),
        Migration(
            18,
            "deletion receipts: what each deletion removed and what its verification found",
            render(dialect, RECEIPT_TABLES),
        ),
        Migration(
            19,
            "messages: a narrow table of chain forks, so a leaf's branch is found cheaply",
            (*render(dialect, FORK_TABLES), FILL_FORKS.format(where="")),
        ),
        Migration(
            20,
            "vectors: a version per owner and per row, so exact search keeps matrices in memory",
            VECTOR_VERSIONS,
        ),
        Migration(
            21,
            "facts: an edit keeps the version it replaced, closed in system time",
            render(dialect, FACT_VERSIONS),
        ),
        Migration(
            22,
            "profile sections: a rewrite keeps the version it replaced (valid_to, "
            "superseded_at), so as_of and known_at read sections too",
            render(dialect, PROFILE_VERSIONS),
        ),
        Migration(
            23,
            "context prefixes: each conversation's latest context as a hash chain, so the next "
            "one reports how much a provider's prompt cache can serve",
            render(dialect, PREFIX_TABLES),
        ),
        Migration(
            24,
            "messages: a position per conversation, shown as seq (no store-wide counter shown)",
            (
                *POSITION_COLUMNS,
                FILL_POSITIONS.format(where=""),
                RAISE_LAST_POSITION.format(where=""),
            ),
        ),
        Migration(
            25,
            "recall: the owner's messages still waiting for a vector, indexed apart, so a "
            "read embeds the newest of them and counts the rest cheaply",
            (RECALL_WAITING,),
        ),
        Migration(
            26,
            "messages: the parent's seq (parent_seq), so a branch is walked by integer key",
            (PARENT_SEQ_COLUMN, FILL_PARENT_SEQS.format(where="")),
        ),
        Migration(
            27,
            "recall: recall_docs keyed by its rowid on SQLite, one b-tree fewer per append",
            _RECALL_ROWID[dialect],
        ),
        Migration(
            28,
            "deletion receipts: whether the deletion destroyed the user's data key "
            "(encryption at rest)",
            ("ALTER TABLE deletion_receipts ADD COLUMN key_destroyed INTEGER NOT NULL DEFAULT 0",),
        ),
        Migration(
            29,
            "encryption at rest: the keyring a store's texts are sealed with, so a store "
            "opened with another keyring stops instead of reading as empty",
            ("CREATE TABLE store_keyring (keyring_id TEXT PRIMARY KEY)",),
        ),
        Migration(
            30,
            "recall: the waiting rows indexed by owner and seq, so a read of a user's newest "
            "ones walks that index alone",
            RECALL_WAITING_BY_SEQ,
        ),
        Migration(
            31,
            "recall: each indexed message's token count beside it, so keyword postings "
            "read no message rows",
            RECALL_TOKEN_COUNT,
        ),
        Migration(
            32,
            "recall: a mark of the messages a keyword flush has looked at, so an append on "
            "SQLite writes no recall row (a flush writes them in batches)",
            RECALL_MARKS[dialect],
        ),
        Migration(
            33,
            "recall: a keyword index whose tokens name their owner and word, so a search "
            "reads no other owner's rows and none of the owner's rows without the word",
            RECALL_TERMS[dialect],
        ),
        Migration(
            34,
            "node memories: a mark on the turn ids of deleted messages, so their turns' "
            "erasure from the blobs survives a crash",
            NODE_TURN_ERASING,
        ),
    )
    for dialect in TYPES
}
