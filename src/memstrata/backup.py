"""Online backups of the embedded store.

SQLite: the database's own online backup API copies a consistent snapshot while the
store stays in use (readers and writers carry on; pages written during the copy are
picked up before it finishes), then the copy is checked with ``PRAGMA
integrity_check``. PostgreSQL is backed up with its own tools (``pg_dump``, base
backups with WAL archiving for point-in-time recovery): see docs/operations.md.
Node memory blobs live in the blob store and are backed up with it (files: copy the
directory; S3: bucket versioning or replication).
"""

from __future__ import annotations

import sqlite3
from collections.abc import Callable
from pathlib import Path

from memstrata.errors import Corruption, InvalidInput

__all__ = ["backup_sqlite"]


def backup_sqlite(
    source: str | Path,
    target: str | Path,
    *,
    pages_per_step: int = 1024,
    progress: Callable[[int, int], None] | None = None,
) -> int:
    """Copy the SQLite database at ``source`` to ``target`` (a new file); returns its size
    in bytes. ``progress(copied_pages, total_pages)`` is called as it goes."""
    src, dst = Path(source), Path(target)
    if not src.is_file():
        raise InvalidInput(f"no SQLite database at {src}", field="db")
    if dst.exists():
        raise InvalidInput(f"{dst} exists; a backup never overwrites", field="out")
    dst.parent.mkdir(parents=True, exist_ok=True)
    tick = progress or (lambda done, total: None)
    with sqlite3.connect(src) as source_conn, sqlite3.connect(dst) as target_conn:
        source_conn.backup(
            target_conn,
            pages=pages_per_step,
            progress=lambda status, remaining, total: tick(total - remaining, total),
        )
        verdict = target_conn.execute("PRAGMA integrity_check").fetchone()
    source_conn.close()
    target_conn.close()
    if verdict is None or verdict[0] != "ok":
        dst.unlink(missing_ok=True)
        raise Corruption(f"the backup failed its integrity check: {verdict}")
    return dst.stat().st_size
