"""The DDL of the context prefixes (migration 23): per conversation, the hash chain of its
latest context (:mod:`memstrata.context.prefix`), so the next one can say how much of it
repeats, whichever process assembles it. Hashes and token counts only, never text."""

from __future__ import annotations

__all__ = ["PREFIX_TABLES"]

PREFIX_TABLES = (
    """CREATE TABLE context_prefixes (
        tenant_id TEXT NOT NULL,
        conversation_id TEXT NOT NULL,
        leaf_id TEXT NOT NULL,
        encoding TEXT NOT NULL,
        chain TEXT NOT NULL,
        updated_at {time} NOT NULL,
        PRIMARY KEY (tenant_id, conversation_id)
    )""",
    "CREATE INDEX context_prefixes_conversation ON context_prefixes (conversation_id)",
)
