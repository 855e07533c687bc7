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

from collections.abc import Callable
from pathlib import Path

import apsw

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
    # The store's own driver (backends/sqlite.py): one copy of SQLite per process.
    source_conn = apsw.Connection(str(src), flags=apsw.SQLITE_OPEN_READWRITE)
    target_conn = apsw.Connection(str(dst))
    try:
        with target_conn.backup("main", source_conn, "main") as copy:
            while not copy.done:
                copy.step(pages_per_step)
                tick(copy.page_count - copy.remaining, copy.page_count)
        found = target_conn.execute("PRAGMA integrity_check").fetchall()
    finally:
        target_conn.close()
        source_conn.close()
    verdict = found[0] if found else None
    if verdict is None or verdict[0] != "ok":
        dst.unlink(missing_ok=True)
        raise Corruption(f"the backup failed its integrity check: {verdict}")
    return dst.stat().st_size
