"""Backend choice by URL, loaded lazily, with install hints for missing extras.

Relational engines (:func:`open_engine`) and blob stores (:func:`open_blob_store`): the ports
they implement live above, in :mod:`memstrata.storage.engine` and :mod:`memstrata.blobs`.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, cast
from urllib.parse import urlsplit

from memstrata.errors import ConfigurationError, MissingDependency

if TYPE_CHECKING:
    from memstrata.blobs import BlobStore
    from memstrata.config import Settings
    from memstrata.storage.engine import Engine

__all__ = ["applied_migrations", "open_blob_store", "open_engine", "redact", "sqlite_path"]


def redact(url: str) -> str:
    """The URL with any password replaced, for logs and error messages."""
    parts = urlsplit(url)
    if parts.password:
        netloc = parts.netloc.replace(f":{parts.password}@", ":***@")
        return parts._replace(netloc=netloc).geturl()
    return url


def sqlite_path(url: str) -> Path | None:
    """``sqlite:///rel/path``, ``sqlite:////abs/path``, ``sqlite://`` or ``sqlite:///:memory:``."""
    rest = url[len("sqlite://") :]
    if rest in ("", "/:memory:", ":memory:"):
        return None
    if not rest.startswith("/"):
        raise ConfigurationError(
            f"sqlite URL must look like sqlite:///path/to/file.db, got {url!r}"
        )
    return Path(rest[1:])


def applied_migrations(url: str) -> set[int] | None:
    """The migration versions a store has applied, read without changing anything (no
    store created, no migration run); None when there is no store (or no schema) yet."""
    scheme = url.split(":", 1)[0].lower()
    if scheme == "sqlite":
        import apsw

        path = sqlite_path(url)
        if path is None:
            return None  # a memory store exists only once opened
        if not path.exists():
            return None
        conn = apsw.Connection(str(path), flags=apsw.SQLITE_OPEN_READONLY)
        try:
            table = conn.execute(
                "SELECT 1 FROM sqlite_master WHERE type = 'table' AND name = 'schema_migrations'"
            ).fetchall()
            rows = (
                conn.execute("SELECT version FROM schema_migrations").fetchall() if table else None
            )
        finally:
            conn.close()
        return None if rows is None else {int(cast(int, r[0])) for r in rows}
    if scheme in ("postgresql", "postgres"):
        try:
            import psycopg
        except ImportError:
            raise MissingDependency(
                'PostgreSQL needs the postgres extra: pip install "memstrata[postgres]"'
            ) from None
        with psycopg.connect(url, connect_timeout=5, autocommit=True) as pg:
            found = pg.execute("SELECT to_regclass('schema_migrations')").fetchone()
            if not found or found[0] is None:
                return None
            return {int(r[0]) for r in pg.execute("SELECT version FROM schema_migrations")}
    raise ConfigurationError(f"unknown database URL scheme {scheme!r} in {redact(url)}")


def open_engine(
    url: str, *, sqlite_synchronous: str = "NORMAL", postgres_wait_s: float = 5.0
) -> Engine:
    scheme = url.split(":", 1)[0].lower()
    if scheme == "sqlite":
        from memstrata.backends.sqlite import SqliteEngine

        return SqliteEngine(sqlite_path(url), synchronous=sqlite_synchronous)
    if scheme in ("postgresql", "postgres"):
        from memstrata.backends.postgres import PostgresEngine

        return PostgresEngine(url, wait_s=postgres_wait_s)
    raise ConfigurationError(f"unknown database URL scheme {scheme!r} in {redact(url)}")


def open_blob_store(url: str, settings: Settings) -> BlobStore:
    """``file:///dir`` (or ``file://rel/dir``), ``memory://`` or ``s3://bucket/prefix``."""
    scheme = url.split(":", 1)[0].lower()
    if scheme not in ("file", "memory", "s3"):
        raise ConfigurationError(
            f"unknown blob store URL scheme {scheme!r} in {url!r}; "
            "use file:///dir, memory:// or s3://bucket/prefix"
        )
    from memstrata.backends.obstore import open_obstore

    return open_obstore(url, settings)
