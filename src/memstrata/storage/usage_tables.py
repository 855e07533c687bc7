"""The DDL of the usage tables (migration 17): what model calls cost, per owner and
purpose, the daily totals budgets are checked against, and the budgets themselves."""

from __future__ import annotations

__all__ = ["USAGE_TABLES"]

# usage_events: one row per LLM call, or per batch of embedder calls of one owner,
# purpose and model (``calls`` says how many); ``at`` is the newest call's time.
# usage_daily: tokens per tenant, purpose and UTC day (days since the epoch), kept by
# the same transaction that inserts the events, so a budget check is one row read.
USAGE_TABLES = (
    """CREATE TABLE usage_events (
        id TEXT PRIMARY KEY,
        tenant_id TEXT NOT NULL,
        user_id TEXT NOT NULL DEFAULT '',
        agent_id TEXT NOT NULL DEFAULT '',
        purpose TEXT NOT NULL,
        model TEXT NOT NULL DEFAULT '',
        kind TEXT NOT NULL,
        calls INTEGER NOT NULL,
        errors INTEGER NOT NULL,
        input_tokens BIGINT NOT NULL,
        output_tokens BIGINT NOT NULL,
        duration_us BIGINT NOT NULL,
        job_id TEXT,
        at {time} NOT NULL
    )""",
    "CREATE INDEX usage_events_tenant ON usage_events (tenant_id, at)",
    "CREATE INDEX usage_events_user ON usage_events (tenant_id, user_id, at)",
    """CREATE TABLE usage_daily (
        tenant_id TEXT NOT NULL,
        purpose TEXT NOT NULL,
        day INTEGER NOT NULL,
        tokens BIGINT NOT NULL,
        PRIMARY KEY (tenant_id, purpose, day)
    )""",
    """CREATE TABLE usage_budgets (
        tenant_id TEXT NOT NULL,
        purpose TEXT NOT NULL,
        daily_tokens BIGINT NOT NULL,
        updated_at {time} NOT NULL,
        PRIMARY KEY (tenant_id, purpose)
    )""",
)
