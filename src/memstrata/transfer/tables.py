"""Which tables a native export carries, their columns, their order, and their owner.

Every table of the schema is either listed here or named in :data:`DERIVED` with the
reason it is left out (a test keeps the two in step with the migrations). Serial
``seq`` columns are never exported: rows are written and re-inserted in ``seq``
order, so the order survives and a round trip gives the same bytes on either
backend.
"""

from __future__ import annotations

from dataclasses import dataclass

__all__ = ["DERIVED", "TABLES", "TableSpec", "with_clocks"]

_CONV = "conversation_id IN (SELECT id FROM conversations WHERE tenant_id = ? AND user_id = ?)"
_USER = "tenant_id = ? AND user_id = ?"
_FACT = "fact_id IN (SELECT id FROM facts WHERE tenant_id = ? AND user_id = ?)"


@dataclass(frozen=True, slots=True)
class TableSpec:
    name: str
    columns: tuple[str, ...]
    order: str  # a total order: the serial seq, else the primary key
    #: SQL filter selecting one user's rows (params: tenant, user; or tenant alone when it
    #: has one placeholder); None: not part of a user's export
    user_filter: str | None
    serial: bool = False  # has a serial ``seq`` (left out, order kept by insertion)
    #: Rows have a unique key besides ``seq`` (an id or a primary key); a log without one
    #: is matched on every column when imported, so an import stays idempotent.
    keyed: bool = True
    #: Columns left out because the import rebuilds them from the others (store-local keys).
    rebuilt: tuple[str, ...] = ()

    def user_params(self, tenant: str, user: str) -> tuple[str, ...]:
        assert self.user_filter is not None
        return (tenant,) if self.user_filter.count("?") == 1 else (tenant, user)


# The columns of a fact, and of an earlier version of one (which adds the fact's seq).
_FACT_COLUMNS = (
    "id",
    "tenant_id",
    "user_id",
    "agent_id",
    "content",
    "content_key",
    "category",
    "confidence",
    "status",
    "origin",
    "superseded_by",
    "source_error",
    "reason",
    "changed_in",
    "created_at",
    "updated_at",
    "valid_from",
    "valid_to",
    "recorded_at",
    "superseded_at",
)

TABLES: tuple[TableSpec, ...] = (
    TableSpec("tenants", ("id", "created_at"), "id", "id = ?"),
    TableSpec(
        "users", ("tenant_id", "id", "created_at"), "tenant_id, id", "tenant_id = ? AND id = ?"
    ),
    TableSpec(
        "api_keys",
        (
            "id",
            "tenant_id",
            "user_id",
            "is_admin",
            "secret_hash",
            "label",
            "created_at",
            "revoked_at",
            "expires_at",
        ),
        "id",
        None,  # keys belong to the operator, not to a data-subject export
    ),
    TableSpec(
        "conversations",
        (
            "id",
            "tenant_id",
            "user_id",
            "agent_id",
            "title",
            "metadata",
            "active_leaf_id",
            "message_count",
            "created_at",
            "updated_at",
            "last_position",  # the counter of message positions (never given twice)
        ),
        "seq",
        _USER,
        serial=True,
    ),
    TableSpec(
        "messages",
        (
            "id",
            "conversation_id",
            "parent_id",
            "role",
            "content",
            "files",
            "tool_calls",
            "tool_call_id",
            "status",
            "metadata",
            "occurred_at",
            "created_at",
            "depth",
            "token_count",
            "branch_tokens",
            "system_tail_id",
            "legacy_parent",
            "chain_id",  # the ancestry label: ids survive an import, so the label does
            "position",  # the place in its conversation (an older export's: filled on import)
        ),
        "seq",
        _CONV,
        serial=True,
        rebuilt=("parent_seq",),  # the parent's seq in this store, filled on import
    ),
    TableSpec(
        "working_memory",
        (
            "tenant_id",
            "user_id",
            "agent_id",
            "conversation_id",
            "format",
            "content",
            "json_schema",
            "template",
            "version",
            "updated_at",
        ),
        "tenant_id, user_id, agent_id, conversation_id",
        _USER,
    ),
    TableSpec(
        "plans", ("conversation_id", "document", "version", "updated_at"), "conversation_id", _CONV
    ),
    TableSpec(
        "iteration_logs",
        ("conversation_id", "task", "attempt", "outcome", "error", "detail", "created_at"),
        "seq",
        _CONV,
        serial=True,
        keyed=False,
    ),
    TableSpec(
        "checkpoints",
        (
            "tenant_id",
            "user_id",
            "agent_id",
            "name",
            "run_id",
            "conversation_id",
            "state",
            "expires_at",
            "expired_at",
            "created_at",
            "updated_at",
        ),
        "tenant_id, user_id, agent_id, name, run_id",
        _USER,
    ),
    TableSpec(
        "run_snapshots",
        ("conversation_id", "run_id", "data", "created_at", "updated_at"),
        "conversation_id, run_id",
        _CONV,
    ),
    TableSpec(
        "summaries",
        (
            "id",
            "conversation_id",
            "up_to_id",
            "up_to_depth",
            "up_to_branch_tokens",
            "version",
            "previous_id",
            "content",
            "method",
            "created_at",
        ),
        "id",
        _CONV,
    ),
    TableSpec(
        "compaction_log",
        ("conversation_id", "leaf_id", "outcome", "reason", "summary_id", "created_at"),
        "seq",
        _CONV,
        serial=True,
        keyed=False,
    ),
    TableSpec(
        "node_memories",
        (
            "conversation_id",
            "app_id",
            "node_id",
            "tenant_id",
            "generation",
            "pending",
            "created_at",
            "last_write_at",
        ),
        "conversation_id, app_id, node_id",
        _CONV,
    ),
    TableSpec("facts", _FACT_COLUMNS, "seq", _USER, serial=True),
    TableSpec(
        "fact_sources",
        ("fact_id", "conversation_id", "message_id"),
        "fact_id, conversation_id, message_id",
        _FACT,
    ),
    TableSpec(
        "fact_events",
        (
            "fact_id",
            "tenant_id",
            "user_id",
            "event",
            "content",
            "category",
            "confidence",
            "reason",
            "related_id",
            "conversation_id",
            "at",
        ),
        "seq",
        _USER,
        serial=True,
        keyed=False,
    ),
    TableSpec(
        "memory_owners",
        ("tenant_id", "user_id", "agent_id", "revision", "updated_at"),
        "tenant_id, user_id, agent_id",
        _USER,
    ),
    TableSpec(
        "profile_sections",
        (
            "tenant_id",
            "user_id",
            "agent_id",
            "section",
            "summary",
            "updated_at",
            "valid_from",
            "recorded_at",
        ),
        "tenant_id, user_id, agent_id, section",
        _USER,
    ),
    # Earlier versions of edited facts and rewritten sections (migrations 21, 22).
    TableSpec("fact_versions", ("seq", *_FACT_COLUMNS), "id, superseded_at", _USER),
    TableSpec(
        "profile_section_versions",
        (
            "tenant_id",
            "user_id",
            "agent_id",
            "section",
            "summary",
            "updated_at",
            "valid_from",
            "valid_to",
            "recorded_at",
            "superseded_at",
        ),
        "tenant_id, user_id, agent_id, section, superseded_at",
        _USER,
    ),
    TableSpec(
        "profile_sources",
        ("tenant_id", "user_id", "agent_id", "section", "conversation_id"),
        "tenant_id, user_id, agent_id, section, conversation_id",
        _USER,
    ),
    TableSpec(
        "longterm_seen",
        ("conversation_id", "message_id"),
        "conversation_id, message_id",
        _CONV,
    ),
    TableSpec(
        "longterm_updates",
        (
            "id",
            "tenant_id",
            "user_id",
            "agent_id",
            "conversation_id",
            "job_id",
            "outcome",
            "signals",
            "llm_calls",
            "prompt_tokens",
            "completion_tokens",
            "counts",
            "notes",
            "raw_output",
            "error",
            "created_at",
        ),
        "seq",
        _USER,
        serial=True,
    ),
    TableSpec(
        "retention_policies",
        ("tenant_id", "kind", "max_age_s", "updated_at"),
        "tenant_id, kind",
        None,  # the operator's settings, not a user's data
    ),
    # Prompt provenance: what entered each recorded prompt, by id (never text).
    TableSpec(
        "context_records",
        (
            "id",
            "tenant_id",
            "user_id",
            "agent_id",
            "conversation_id",
            "leaf_id",
            "budget",
            "report",
            "reply_id",
            "linked_at",
            "created_at",
        ),
        "seq",
        _USER,
        serial=True,
    ),
    TableSpec(
        "context_record_items",
        (
            "context_id",
            "position",
            "tier",
            "kind",
            "item_id",
            "conversation_id",
            "version",
            "deleted",
        ),
        "context_id, position",
        "context_id IN (SELECT id FROM context_records WHERE tenant_id = ? AND user_id = ?)",
    ),
)

#: Tables left out, and why: each is rebuilt from exported data or is per-process state.
DERIVED: dict[str, str] = {
    "schema_migrations": "the importing store records its own migrations",
    "store_keyring": "the importing store's own keyring (encryption at rest)",
    "jobs": "background work is re-queued by the features (reindex, extraction) after import",
    "recall_docs": "rebuilt by the import (keyword index) and by recall (embeddings)",
    "recall_terms": "rebuilt with recall_docs",
    "recall_marks": "rebuilt with recall_docs",
    "message_forks": "rebuilt by the import from the messages' ancestry labels",
    "vectors": "embeddings are remade from the messages by the importing store's embedder",
    "vector_spaces": "made with the vectors",
    "vector_owners": "versions of the vectors, for in-memory search: made with the vectors",
    "workers": "heartbeats of the processes running now, not data",
    "node_turn_ids": "an index of the node memories' blobs, which exports do not carry",
    # Known gap: LangGraph's own storage is not in a user's export yet (its values are
    # LangGraph's serialisation, bytes; the messages its graphs said are, as conversations).
    "graph_checkpoints": "LangGraph checkpoints: not exported yet (their messages are)",
    "graph_writes": "LangGraph pending writes: not exported yet",
    "graph_items": "LangGraph store items belong to a tenant, not a user: not exported",
    "graph_item_vectors": "made with the store items",
    "usage_events": "the tenant's accounting of model calls, not a user's memory",
    "usage_daily": "daily totals of usage_events, for budgets",
    "usage_budgets": "the operator's settings, not a user's data",
    "deletion_receipts": "records of deletions (ids and counts), kept by the tenant",
    "context_prefixes": "hashes of each conversation's latest context, remade by the next one",
}


# The clock columns (migration 15) an export made before them lacks, and how the row's
# own times fill them: the data keeps its event time, never the time of the import.
_CLOCKS: dict[str, tuple[tuple[str, str], ...]] = {
    "facts": (
        ("valid_from", "created_at"),
        ("recorded_at", "created_at"),
        ("superseded_at", "updated_at"),  # for a fact that is no longer active
    ),
    "profile_sections": (("valid_from", "updated_at"), ("recorded_at", "updated_at")),
}


def with_clocks(
    table: str, columns: list[str], values: list[object]
) -> tuple[list[str], list[object]]:
    """A row of an older export with its missing clock columns filled from its own times."""
    missing = [(c, src) for c, src in _CLOCKS.get(table, ()) if c not in columns]
    if not missing:
        return columns, values
    row = dict(zip(columns, values, strict=True))
    for column, source in missing:
        value = row.get(source)
        if column == "superseded_at" and row.get("status", "active") == "active":
            value = None
        row[column] = value
    return list(row), list(row.values())
