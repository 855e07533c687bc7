"""Backend choice by URL, loaded lazily, with install hints for missing extras."""

from __future__ import annotations

from pathlib import Path
from typing import Protocol, TypeVar
from urllib.parse import urlsplit

from memstrata.errors import ConfigurationError
from memstrata.storage.plan import Plan

__all__ = ["Engine", "open_engine", "redact"]

T = TypeVar("T")


class Engine(Protocol):
    """A relational backend: runs sans-IO plans, sync or async, each in one transaction."""

    dialect: str
    location: str

    def run(self, plan: Plan[T]) -> T: ...

    async def arun(self, plan: Plan[T]) -> T: ...

    def migrate(self) -> list[int]: ...

    def schema_version(self) -> int: ...

    def close(self) -> None: ...

    @property
    def closed(self) -> bool: ...

    async def aclose(self) -> None: ...


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


def open_engine(url: str, *, sqlite_synchronous: str = "NORMAL") -> Engine:
    scheme = url.split(":", 1)[0].lower()
    if scheme == "sqlite":
        from memstrata.backends.sqlite import SqliteEngine

        return SqliteEngine(sqlite_path(url), synchronous=sqlite_synchronous)
    if scheme in ("postgresql", "postgres"):
        from memstrata.backends.postgres import PostgresEngine

        return PostgresEngine(url)
    raise ConfigurationError(f"unknown database URL scheme {scheme!r} in {redact(url)}")
