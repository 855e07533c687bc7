"""Typed settings, read from ``MEMSTRATA_*`` environment variables (never at import)."""

from __future__ import annotations

from pathlib import Path
from typing import Literal

from pydantic import Field
from pydantic_settings import BaseSettings, SettingsConfigDict

__all__ = ["Settings"]


class Settings(BaseSettings):
    model_config = SettingsConfigDict(env_prefix="MEMSTRATA_", extra="ignore")

    home: Path = Field(default=Path(".memstrata"), description="Where the embedded store lives.")
    db: str | None = Field(default=None, description="Database URL; default: sqlite under home.")
    token_encoding: Literal["o200k_base", "cl100k_base"] = "o200k_base"
    sqlite_synchronous: Literal["OFF", "NORMAL", "FULL", "EXTRA"] = "NORMAL"
    max_content_bytes: int = Field(default=1_000_000, ge=1)
    max_body_bytes: int = Field(default=4_000_000, ge=1024)
    redis: str | None = Field(default=None, description="Redis URL for locks and job wake-ups.")
    worker: Literal["auto", "thread", "off"] = Field(
        default="auto",
        description="auto: an in-process worker thread on SQLite, none on PostgreSQL (run `memstrata worker`).",
    )
    worker_poll_seconds: float = Field(default=1.0, gt=0)
    host: str = "127.0.0.1"
    port: int = Field(default=8700, ge=1, le=65535)
    local_tenant: str = "local"
    local_user: str = "local"

    def database_url(self) -> str:
        return self.db or f"sqlite:///{(self.home / 'memstrata.db').as_posix()}"
