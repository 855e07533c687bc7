"""The DDL of every table, as first created per feature (later migrations change them;
see :mod:`memstrata.storage.schema`), with the few type names that differ per dialect."""

from __future__ import annotations

__all__ = [
    "CORE_TABLES",
    "GRAPH_TABLES",
    "JOB_TABLES",
    "LONGTERM_TABLES",
    "NODE_TABLES",
    "NODE_TURN_ERASING",
    "NODE_TURN_TABLES",
    "PROVENANCE_TABLES",
    "RETENTION_TABLES",
    "STATE_TABLES",
    "TYPES",
    "VECTORS_BY_MESSAGE",
    "VECTOR_TABLES",
    "WORKER_TABLES",
    "render",
]


CORE_TABLES = (
    """CREATE TABLE tenants (
        id TEXT PRIMARY KEY,
        created_at {time} NOT NULL
    )""",
    """CREATE TABLE users (
        tenant_id TEXT NOT NULL REFERENCES tenants(id),
        id TEXT NOT NULL,
        created_at {time} NOT NULL,
        PRIMARY KEY (tenant_id, id)
    )""",
    """CREATE TABLE api_keys (
        id TEXT PRIMARY KEY,
        tenant_id TEXT NOT NULL REFERENCES tenants(id),
        user_id TEXT,
        is_admin INTEGER NOT NULL,
        secret_hash TEXT NOT NULL UNIQUE,
        label TEXT,
        created_at {time} NOT NULL,
        revoked_at {time}
    )""",
    "CREATE INDEX api_keys_owner ON api_keys (tenant_id, user_id)",
    """CREATE TABLE conversations (
        seq {serial},
        id TEXT NOT NULL UNIQUE,
        tenant_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        agent_id TEXT NOT NULL DEFAULT '',
        title TEXT,
        metadata TEXT,
        active_leaf_id TEXT,
        message_count INTEGER NOT NULL DEFAULT 0,
        created_at {time} NOT NULL,
        updated_at {time} NOT NULL,
        FOREIGN KEY (tenant_id, user_id) REFERENCES users (tenant_id, id)
    )""",
    "CREATE INDEX conversations_owner ON conversations (tenant_id, user_id, agent_id, seq)",
    """CREATE TABLE messages (
        seq {serial},
        id TEXT NOT NULL UNIQUE,
        conversation_id TEXT NOT NULL,
        parent_id TEXT,
        role TEXT NOT NULL,
        content TEXT NOT NULL,
        files TEXT,
        tool_calls TEXT,
        tool_call_id TEXT,
        status TEXT NOT NULL,
        metadata TEXT,
        occurred_at {time} NOT NULL,
        created_at {time} NOT NULL,
        depth INTEGER NOT NULL,
        token_count INTEGER NOT NULL,
        branch_tokens INTEGER NOT NULL,
        system_tail_id TEXT,
        legacy_parent INTEGER NOT NULL DEFAULT 0
    )""",
    "CREATE INDEX messages_parent ON messages (parent_id)",
    "CREATE INDEX messages_conversation ON messages (conversation_id, seq)",
)


JOB_TABLES = (
    """CREATE TABLE jobs (
        id TEXT PRIMARY KEY,
        kind TEXT NOT NULL,
        dedupe_key TEXT,
        tenant_id TEXT NOT NULL,
        user_id TEXT,
        agent_id TEXT NOT NULL DEFAULT '',
        conversation_id TEXT,
        payload TEXT,
        flags TEXT,
        status TEXT NOT NULL,
        attempts INTEGER NOT NULL DEFAULT 0,
        max_attempts INTEGER NOT NULL,
        run_after {time} NOT NULL,
        first_enqueued_at {time} NOT NULL,
        enqueue_count INTEGER NOT NULL DEFAULT 1,
        lease_until {time},
        lease_token TEXT,
        worker TEXT,
        last_error TEXT,
        created_at {time} NOT NULL,
        updated_at {time} NOT NULL,
        finished_at {time}
    )""",
    # At most one queued job per (kind, key): later enqueues merge into it.
    "CREATE UNIQUE INDEX jobs_queued_key ON jobs (kind, dedupe_key) "
    "WHERE status = 'queued' AND dedupe_key IS NOT NULL",
    "CREATE INDEX jobs_ready ON jobs (status, run_after)",
    "CREATE INDEX jobs_owner ON jobs (tenant_id, user_id, status)",
    "CREATE INDEX jobs_conversation ON jobs (conversation_id)",
)

# Vectors: one row per embedded item, the embedder identity beside it, the vector as
# float32 little-endian bytes. This table is the source of truth on every backend; an
# approximate index (pgvector, when the extension exists) is derived from it at first use
# and never part of a migration, so a database without the extension always migrates.
VECTOR_TABLES = (
    """CREATE TABLE vectors (
        id TEXT PRIMARY KEY,
        tenant_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        agent_id TEXT NOT NULL DEFAULT '',
        conversation_id TEXT,
        message_id TEXT,
        embedder TEXT NOT NULL,
        dim INTEGER NOT NULL,
        vector {blob} NOT NULL,
        created_at {time} NOT NULL
    )""",
    "CREATE INDEX vectors_owner ON vectors (tenant_id, user_id, embedder, dim, agent_id)",
    "CREATE INDEX vectors_conversation ON vectors (conversation_id)",
    # One dimension per embedder identity; index_table names a derived ANN table, if any.
    """CREATE TABLE vector_spaces (
        embedder TEXT PRIMARY KEY,
        dim INTEGER NOT NULL,
        index_table TEXT,
        created_at {time} NOT NULL
    )""",
)

# Agent state and compaction (migration 4): working memory, plans, iteration logs,
# checkpoints, run snapshots, rolling summaries and the log of compaction attempts.
# A summary names the message it covers up to (with that message's depth and branch
# tokens), so "does it serve this leaf" is an ancestry check, never a guess.
STATE_TABLES = (
    """CREATE TABLE working_memory (
        tenant_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        agent_id TEXT NOT NULL DEFAULT '',
        conversation_id TEXT NOT NULL DEFAULT '',
        format TEXT NOT NULL,
        content TEXT NOT NULL,
        json_schema TEXT,
        template TEXT,
        version INTEGER NOT NULL,
        updated_at {time} NOT NULL,
        PRIMARY KEY (tenant_id, user_id, agent_id, conversation_id)
    )""",
    "CREATE INDEX working_memory_conversation ON working_memory (conversation_id)",
    """CREATE TABLE plans (
        conversation_id TEXT PRIMARY KEY,
        document TEXT NOT NULL,
        version INTEGER NOT NULL,
        updated_at {time} NOT NULL
    )""",
    """CREATE TABLE iteration_logs (
        seq {serial},
        conversation_id TEXT NOT NULL,
        task TEXT NOT NULL,
        attempt INTEGER NOT NULL,
        outcome TEXT NOT NULL,
        error TEXT,
        detail TEXT,
        created_at {time} NOT NULL
    )""",
    "CREATE INDEX iteration_logs_task ON iteration_logs (conversation_id, task, seq)",
    """CREATE TABLE checkpoints (
        tenant_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        agent_id TEXT NOT NULL DEFAULT '',
        name TEXT NOT NULL,
        run_id TEXT NOT NULL,
        conversation_id TEXT,
        state TEXT,
        expires_at {time},
        expired_at {time},
        created_at {time} NOT NULL,
        updated_at {time} NOT NULL,
        PRIMARY KEY (tenant_id, user_id, agent_id, name, run_id)
    )""",
    "CREATE INDEX checkpoints_conversation ON checkpoints (conversation_id)",
    """CREATE TABLE run_snapshots (
        conversation_id TEXT NOT NULL,
        run_id TEXT NOT NULL,
        data TEXT NOT NULL,
        created_at {time} NOT NULL,
        updated_at {time} NOT NULL,
        PRIMARY KEY (conversation_id, run_id)
    )""",
    """CREATE TABLE summaries (
        id TEXT PRIMARY KEY,
        conversation_id TEXT NOT NULL,
        up_to_id TEXT NOT NULL,
        up_to_depth INTEGER NOT NULL,
        up_to_branch_tokens INTEGER NOT NULL,
        version INTEGER NOT NULL,
        previous_id TEXT,
        content TEXT NOT NULL,
        method TEXT NOT NULL,
        created_at {time} NOT NULL
    )""",
    "CREATE INDEX summaries_conversation ON summaries (conversation_id, up_to_depth)",
    """CREATE TABLE compaction_log (
        seq {serial},
        conversation_id TEXT NOT NULL,
        leaf_id TEXT,
        outcome TEXT NOT NULL,
        reason TEXT,
        summary_id TEXT,
        created_at {time} NOT NULL
    )""",
    "CREATE INDEX compaction_log_conversation ON compaction_log (conversation_id, seq)",
)

# Node memories: which blob generation of (app, conversation, node) is readable, and when
# it was last written (for gc). The turns themselves live in the blob store.
NODE_TABLES = (
    """CREATE TABLE node_memories (
        conversation_id TEXT NOT NULL,
        app_id TEXT NOT NULL,
        node_id TEXT NOT NULL,
        tenant_id TEXT NOT NULL,
        generation TEXT NOT NULL,
        pending INTEGER NOT NULL DEFAULT 0,
        created_at {time} NOT NULL,
        last_write_at {time} NOT NULL,
        PRIMARY KEY (conversation_id, app_id, node_id)
    )""",
    "CREATE INDEX node_memories_last_write ON node_memories (last_write_at)",
)

# Node memory turn ids (migration 11): which caller message ids a node memory generation
# holds, with a digest of their turns, so a replayed turn is recognised without reading the
# blobs (idempotent add_turn) and history knows whether its current message is stored.
NODE_TURN_TABLES = (
    """CREATE TABLE node_turn_ids (
        conversation_id TEXT NOT NULL,
        app_id TEXT NOT NULL,
        node_id TEXT NOT NULL,
        generation TEXT NOT NULL,
        message_id TEXT NOT NULL,
        digest TEXT NOT NULL,
        created_at {time} NOT NULL,
        PRIMARY KEY (conversation_id, app_id, node_id, generation, message_id)
    )""",
)

# Node memory turns of deleted messages (migration 34): the deletion marks their ids in the
# same transaction, and the blobs are rewritten without them afterwards (inline, or by the
# ``nodes.erase`` job after a crash); the marked rows go once the turns are gone.
# Readers leave the marked turns out meanwhile, found through a partial index.
NODE_TURN_ERASING = (
    "ALTER TABLE node_turn_ids ADD COLUMN erasing INTEGER NOT NULL DEFAULT 0",
    "CREATE INDEX node_turn_ids_erasing ON node_turn_ids "
    "(conversation_id, app_id, node_id, generation, message_id) WHERE erasing = 1",
)

# Deleting one message finds its vectors without a scan (migration 11).
VECTORS_BY_MESSAGE = "CREATE INDEX vectors_message ON vectors (conversation_id, message_id)"

# Long-term memory (migration 7). Facts are marked, never rewritten, by extraction
# (``status``: active, superseded, removed, evicted); ``changed_in`` names the
# conversation whose extraction last changed a fact's status, so forgetting that
# conversation can undo the change. At most one *active* fact per owner and content key.
LONGTERM_TABLES = (
    """CREATE TABLE facts (
        seq {serial},
        id TEXT NOT NULL UNIQUE,
        tenant_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        agent_id TEXT NOT NULL DEFAULT '',
        content TEXT NOT NULL,
        content_key TEXT NOT NULL,
        category TEXT NOT NULL,
        confidence {real} NOT NULL,
        status TEXT NOT NULL,
        origin TEXT NOT NULL,
        superseded_by TEXT,
        source_error TEXT,
        reason TEXT,
        changed_in TEXT,
        created_at {time} NOT NULL,
        updated_at {time} NOT NULL
    )""",
    "CREATE INDEX facts_owner ON facts (tenant_id, user_id, agent_id, status, seq)",
    "CREATE UNIQUE INDEX facts_active_key ON facts (tenant_id, user_id, agent_id, content_key) "
    "WHERE status = 'active'",
    "CREATE INDEX facts_changed_in ON facts (changed_in)",
    """CREATE TABLE fact_sources (
        fact_id TEXT NOT NULL,
        conversation_id TEXT NOT NULL,
        message_id TEXT NOT NULL DEFAULT '',
        PRIMARY KEY (fact_id, conversation_id, message_id)
    )""",
    "CREATE INDEX fact_sources_conversation ON fact_sources (conversation_id)",
    """CREATE TABLE fact_events (
        seq {serial},
        fact_id TEXT NOT NULL,
        tenant_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        event TEXT NOT NULL,
        content TEXT NOT NULL,
        category TEXT NOT NULL,
        confidence {real} NOT NULL,
        reason TEXT,
        related_id TEXT,
        conversation_id TEXT,
        at {time} NOT NULL
    )""",
    "CREATE INDEX fact_events_fact ON fact_events (fact_id, seq)",
    "CREATE INDEX fact_events_owner ON fact_events (tenant_id, user_id)",
    "CREATE INDEX fact_events_conversation ON fact_events (conversation_id)",
    # One row per owner: its revision is bumped first in every update, which serialises
    # concurrent updates of one user's memory (a row lock on PostgreSQL).
    """CREATE TABLE memory_owners (
        tenant_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        agent_id TEXT NOT NULL DEFAULT '',
        revision BIGINT NOT NULL,
        updated_at {time} NOT NULL,
        PRIMARY KEY (tenant_id, user_id, agent_id)
    )""",
    """CREATE TABLE profile_sections (
        tenant_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        agent_id TEXT NOT NULL DEFAULT '',
        section TEXT NOT NULL,
        summary TEXT NOT NULL,
        updated_at {time} NOT NULL,
        PRIMARY KEY (tenant_id, user_id, agent_id, section)
    )""",
    # Which conversations a section was written from: forgetting one clears the section.
    """CREATE TABLE profile_sources (
        tenant_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        agent_id TEXT NOT NULL DEFAULT '',
        section TEXT NOT NULL,
        conversation_id TEXT NOT NULL,
        PRIMARY KEY (tenant_id, user_id, agent_id, section, conversation_id)
    )""",
    "CREATE INDEX profile_sources_conversation ON profile_sources (conversation_id)",
    # Messages already fed to extraction (the watermark, per message so branches work).
    """CREATE TABLE longterm_seen (
        conversation_id TEXT NOT NULL,
        message_id TEXT NOT NULL,
        PRIMARY KEY (conversation_id, message_id)
    )""",
    # One row per extraction attempt: outcome, token usage, counts, and the raw model
    # output when it could not be used.
    """CREATE TABLE longterm_updates (
        seq {serial},
        id TEXT NOT NULL UNIQUE,
        tenant_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        agent_id TEXT NOT NULL DEFAULT '',
        conversation_id TEXT,
        job_id TEXT,
        outcome TEXT NOT NULL,
        signals TEXT,
        llm_calls INTEGER NOT NULL,
        prompt_tokens INTEGER NOT NULL,
        completion_tokens INTEGER NOT NULL,
        counts TEXT,
        notes TEXT,
        raw_output TEXT,
        error TEXT,
        created_at {time} NOT NULL
    )""",
    "CREATE INDEX longterm_updates_owner ON longterm_updates (tenant_id, user_id, agent_id, seq)",
    "CREATE INDEX longterm_updates_conversation ON longterm_updates (conversation_id)",
)

# Retention policies (migration 9): tenant '*' applies to tenants without their own.
RETENTION_TABLES = (
    """CREATE TABLE retention_policies (
        tenant_id TEXT NOT NULL,
        kind TEXT NOT NULL,
        max_age_s BIGINT NOT NULL,
        updated_at {time} NOT NULL,
        PRIMARY KEY (tenant_id, kind)
    )""",
)

# LangGraph graphs (migration 12): checkpoints and pending writes of a checkpointer (the
# values are LangGraph's own serialisation, kept as bytes with its type tag), and the
# items of a LangGraph store with the vectors of their indexed fields.
GRAPH_TABLES = (
    """CREATE TABLE graph_checkpoints (
        tenant_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        agent_id TEXT NOT NULL DEFAULT '',
        thread_id TEXT NOT NULL,
        checkpoint_ns TEXT NOT NULL,
        checkpoint_id TEXT NOT NULL,
        parent_id TEXT,
        run_id TEXT,
        type TEXT NOT NULL,
        checkpoint {blob} NOT NULL,
        metadata_type TEXT NOT NULL,
        metadata {blob} NOT NULL,
        created_at {time} NOT NULL,
        PRIMARY KEY (tenant_id, user_id, agent_id, thread_id, checkpoint_ns, checkpoint_id)
    )""",
    "CREATE INDEX graph_checkpoints_run ON graph_checkpoints (tenant_id, user_id, run_id)",
    """CREATE TABLE graph_writes (
        tenant_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        agent_id TEXT NOT NULL DEFAULT '',
        thread_id TEXT NOT NULL,
        checkpoint_ns TEXT NOT NULL,
        checkpoint_id TEXT NOT NULL,
        task_id TEXT NOT NULL,
        idx INTEGER NOT NULL,
        task_path TEXT NOT NULL,
        channel TEXT NOT NULL,
        type TEXT NOT NULL,
        value {blob} NOT NULL,
        PRIMARY KEY (tenant_id, user_id, agent_id, thread_id, checkpoint_ns, checkpoint_id,
                     task_id, idx)
    )""",
    """CREATE TABLE graph_items (
        tenant_id TEXT NOT NULL,
        agent_id TEXT NOT NULL DEFAULT '',
        namespace TEXT NOT NULL,
        item_key TEXT NOT NULL,
        value TEXT NOT NULL,
        created_at {time} NOT NULL,
        updated_at {time} NOT NULL,
        ttl_s {real},
        expires_at {time},
        PRIMARY KEY (tenant_id, agent_id, namespace, item_key)
    )""",
    "CREATE INDEX graph_items_expiry ON graph_items (expires_at)",
    """CREATE TABLE graph_item_vectors (
        tenant_id TEXT NOT NULL,
        agent_id TEXT NOT NULL DEFAULT '',
        namespace TEXT NOT NULL,
        item_key TEXT NOT NULL,
        field_path TEXT NOT NULL,
        vector {blob} NOT NULL,
        PRIMARY KEY (tenant_id, agent_id, namespace, item_key, field_path)
    )""",
)

# Worker presence: one row per running worker, refreshed by its heartbeat (jobs/presence.py).
WORKER_TABLES = (
    """CREATE TABLE workers (
        name TEXT PRIMARY KEY,
        kinds TEXT NOT NULL,
        started_at {time} NOT NULL,
        seen_at {time} NOT NULL
    )""",
    "CREATE INDEX workers_seen ON workers (seen_at)",
)

# Prompt provenance (migration 16): a recorded context assembly and the ids of what it
# injected (never their text). ``reply_id`` is the assistant message it was linked to.
# An item row whose message or fact is gone stays as a tombstone (``deleted``).
PROVENANCE_TABLES = (
    """CREATE TABLE context_records (
        seq {serial},
        id TEXT NOT NULL UNIQUE,
        tenant_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        agent_id TEXT NOT NULL DEFAULT '',
        conversation_id TEXT NOT NULL,
        leaf_id TEXT,
        budget INTEGER NOT NULL,
        report TEXT NOT NULL,
        reply_id TEXT,
        linked_at {time},
        created_at {time} NOT NULL
    )""",
    "CREATE INDEX context_records_conversation ON context_records (conversation_id, seq)",
    "CREATE INDEX context_records_owner ON context_records (tenant_id, user_id, agent_id, seq)",
    "CREATE INDEX context_records_age ON context_records (tenant_id, created_at)",
    "CREATE UNIQUE INDEX context_records_reply ON context_records (conversation_id, reply_id) "
    "WHERE reply_id IS NOT NULL",
    """CREATE TABLE context_record_items (
        context_id TEXT NOT NULL,
        position INTEGER NOT NULL,
        tier TEXT NOT NULL,
        kind TEXT NOT NULL,
        item_id TEXT NOT NULL,
        conversation_id TEXT NOT NULL DEFAULT '',
        version BIGINT,
        deleted INTEGER NOT NULL DEFAULT 0,
        PRIMARY KEY (context_id, position)
    )""",
    "CREATE INDEX context_record_items_item ON context_record_items (kind, item_id)",
    "CREATE INDEX context_record_items_message ON context_record_items (conversation_id, item_id)",
)

# Deletion receipts (receipts/): what a deletion removed (ids and counts, never content) and
# what the verification scan after it found. Kept by retention (kind "receipts"), never by the
# deletion they describe. ``owner_visible`` turns 0 when the user is deleted: from then on only
# the tenant's admins read the user's receipts (a re-created user of that name does not).
RECEIPT_TABLES = (
    """CREATE TABLE deletion_receipts (
        id TEXT PRIMARY KEY,
        tenant_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        agent_id TEXT NOT NULL DEFAULT '',
        kind TEXT NOT NULL,
        subject_ids TEXT NOT NULL,
        actor TEXT NOT NULL,
        tables TEXT NOT NULL,
        blobs TEXT NOT NULL,
        created_at {time} NOT NULL,
        owner_visible INTEGER NOT NULL DEFAULT 1,
        verified INTEGER,
        verified_at {time},
        findings TEXT
    )""",
    "CREATE INDEX deletion_receipts_owner ON deletion_receipts (tenant_id, user_id, created_at)",
    "CREATE INDEX deletion_receipts_age ON deletion_receipts (created_at)",
)

TYPES = {
    "sqlite": {
        "serial": "INTEGER PRIMARY KEY AUTOINCREMENT",
        "time": "INTEGER",
        "blob": "BLOB",
        "real": "REAL",
        "clustered": " WITHOUT ROWID",  # rows stored in key order: one B-tree descent each
    },
    "postgres": {
        "serial": "BIGINT GENERATED ALWAYS AS IDENTITY PRIMARY KEY",
        "time": "BIGINT",
        "blob": "BYTEA",
        "real": "DOUBLE PRECISION",
        "clustered": "",
    },
}


def render(dialect: str, statements: tuple[str, ...]) -> tuple[str, ...]:
    """One DDL text per table, with the few type names that differ filled in per dialect."""
    return tuple(sql.format(**TYPES[dialect]) for sql in statements)
