"""Conformance: the schema migrations are recorded and idempotent."""

from __future__ import annotations

from memstrata import Memory
from memstrata.storage.schema import MIGRATIONS
from memstrata.testing.conformance.helpers import (
    sql_rows,
)


class MigrationConformance:
    def test_migrations_recorded(self, memory: Memory) -> None:
        admin = memory.admin
        versions = [m.version for m in MIGRATIONS[admin.dialect]]
        assert admin.schema_version() == max(versions)
        rows = sql_rows(memory, "SELECT version FROM schema_migrations ORDER BY version")
        assert [int(r[0]) for r in rows] == versions
        assert admin.migrate() == []
        assert admin.schema_version() == max(versions)
