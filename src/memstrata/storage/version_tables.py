"""The DDL of earlier versions (migrations 21 and 22): two clocks for edits.

An edit of a fact, or a rewrite of a profile section, keeps what it replaced as a row
here, closed in system time (``superseded_at``: when memstrata stopped holding it), so
``as_of`` / ``known_at`` questions about a time before the edit read the old text.
``fact_versions`` has the columns of ``facts`` (``seq`` is the fact's, for the order of
listings); a profile version says until when its text held in the world (``valid_to``:
when the rewrite's text began).
"""

from __future__ import annotations

__all__ = ["FACT_VERSIONS", "PROFILE_VERSIONS"]

FACT_VERSIONS = (
    """CREATE TABLE fact_versions (
        seq BIGINT NOT NULL,
        id TEXT NOT NULL,
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
        updated_at {time} NOT NULL,
        valid_from {time},
        valid_to {time},
        recorded_at {time},
        superseded_at {time} NOT NULL,
        PRIMARY KEY (id, superseded_at)
    )""",
    "CREATE INDEX fact_versions_owner ON fact_versions (tenant_id, user_id, agent_id)",
)

PROFILE_VERSIONS = (
    """CREATE TABLE profile_section_versions (
        tenant_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        agent_id TEXT NOT NULL DEFAULT '',
        section TEXT NOT NULL,
        summary TEXT NOT NULL,
        updated_at {time} NOT NULL,
        valid_from {time},
        valid_to {time},
        recorded_at {time},
        superseded_at {time} NOT NULL,
        PRIMARY KEY (tenant_id, user_id, agent_id, section, superseded_at)
    )""",
)
