"""The DDL of migration 20: a version per owner of vectors, and the version that wrote
each vector, so exact search can keep a user's matrix in memory and know, with one row
read, whether it is current and whether only additions happened since."""

from __future__ import annotations

__all__ = ["VECTOR_VERSIONS"]

# vector_owners: epoch names the row's incarnation (a new one when a user is deleted and
# comes back, so versions never repeat for a cache); version goes up by one with every
# transaction that writes or deletes the owner's vectors; deleted_version is the version
# of the latest one that deleted or replaced any. vectors.version: the owner's version
# that inserted the row (0: stored before this migration).
VECTOR_VERSIONS = (
    """CREATE TABLE vector_owners (
        tenant_id TEXT NOT NULL,
        user_id TEXT NOT NULL,
        epoch TEXT NOT NULL,
        version BIGINT NOT NULL,
        deleted_version BIGINT NOT NULL,
        PRIMARY KEY (tenant_id, user_id)
    )""",
    "ALTER TABLE vectors ADD COLUMN version BIGINT NOT NULL DEFAULT 0",
    "CREATE INDEX vectors_owner_version ON vectors (tenant_id, user_id, embedder, dim, version)",
)
