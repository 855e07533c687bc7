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
    postgres_wait_s: float = Field(
        default=5.0,
        gt=0,
        le=60,
        description="How long a request waits for a PostgreSQL connection before it answers "
        "503; after a connection failure requests answer 503 at once while a probe retries "
        "every quarter second.",
    )
    ready_timeout_s: float = Field(
        default=1.5,
        gt=0,
        description="/readyz answers 503 when the backends have not all answered within this.",
    )
    max_content_bytes: int = Field(default=1_000_000, ge=1)
    max_body_bytes: int = Field(default=4_000_000, ge=1024)
    redis: str | None = Field(default=None, description="Redis URL for locks and job wake-ups.")
    worker: Literal["auto", "thread", "off"] = Field(
        default="auto",
        description="auto: an in-process worker thread on SQLite, none on PostgreSQL (run `memstrata worker`).",
    )
    worker_poll_seconds: float = Field(default=1.0, gt=0)
    usage_flush_seconds: float = Field(
        default=1.0,
        ge=0,
        description="How often buffered usage rows (model calls) are written to the store; "
        "0 writes them only at job ends, reports and close.",
    )
    blobs: str | None = Field(
        default=None, description="Blob store URL (file:///dir, memory://, s3://bucket/prefix)."
    )
    s3_endpoint: str | None = Field(default=None, description="S3-compatible endpoint URL.")
    s3_region: str = "us-east-1"
    s3_access_key_id: str | None = None
    s3_secret_access_key: str | None = None
    blob_retries: int = Field(default=3, ge=0, description="Retries of a failed store request.")
    blob_timeout_s: float = Field(default=30.0, gt=0, description="Per-request store timeout.")
    host: str = Field(default="127.0.0.1", description="Where `memstrata serve` listens (--host).")
    port: int = Field(
        default=8700, ge=1, le=65535, description="The port `memstrata serve` listens on (--port)."
    )
    llm_base_url: str | None = Field(default=None, description="OpenAI-compatible endpoint.")
    llm_api_key: str | None = Field(default=None, description="Key for the LLM endpoint.")
    llm_model: str | None = Field(default=None, description="Model for compaction; none: offline.")
    llm_timeout_seconds: float = Field(default=60.0, gt=0)
    llm_retries: int = Field(default=2, ge=0)
    local_tenant: str = "local"
    local_user: str = "local"
    recall_index: bool = Field(
        default=True,
        description="Index messages for recall as they are appended (off: no recall for them "
        "until `memstrata reindex`).",
    )
    recall_embed: Literal["background", "search", "inline", "off"] = Field(
        default="search",
        description="When recall embeds new messages: when a read needs them, a bounded amount "
        "per read (appends never wait on the embedder); also in a debounced background job "
        "after appends; `inline`: an append of a small message embeds it before returning "
        "(a burst of appends and larger messages go to the background job); or never "
        "(keyword recall only).",
    )
    recall_embed_inline_max_chars: int = Field(
        default=1000,
        ge=0,
        description="With MEMSTRATA_RECALL_EMBED=inline: the longest message (its indexed "
        "text, in characters) an append embeds itself; longer ones go to the background job.",
    )
    recall_embed_inline_burst_ms: float = Field(
        default=250.0,
        ge=0,
        description="With MEMSTRATA_RECALL_EMBED=inline: an append that comes this soon after "
        "the previous append this process made to the same conversation is part of a burst "
        "(a bulk import, a replayed chat) and leaves its message to the background job, "
        "which embeds in batches at a fraction of the cost per message (0: every small "
        "append embeds its message itself).",
    )
    recall_read_embed_max: int = Field(
        default=256,
        ge=0,
        description="Most of the caller's waiting messages (newest first) a read "
        "(context, recall search) embeds before it searches, so it finds what was just "
        "written by meaning; past it, the read reports the rest as `pending` and queues "
        "the embedding job.",
    )
    receipts_inline_scan_max_messages: int = Field(
        default=10_000,
        ge=0,
        description="A deletion's verification scan reads the owner's rows (every table's "
        "rows for a user deletion): it runs inside the deleting call while the owner (the "
        "store, for a user deletion) holds at most this many messages (a whole-store scan "
        "takes about 0.25 s at 10k on SQLite), else in the tenant's receipts.verify job, "
        "one per tenant and of low priority (the receipt says verified: null until it has "
        "run).",
    )
    vector_cache_mb: int = Field(
        default=256,
        ge=0,
        description="Exact vector search (SQLite; PostgreSQL without pgvector): memory for "
        "users' vector matrices kept between searches, least recently used out first "
        "(100k vectors of 384 dimensions take ~200 MB); 0 reads the vectors every search.",
    )

    rate_limit_per_second: float = Field(
        default=0.0,
        ge=0,
        description="Requests per second per API key, on average (0: no limit).",
    )
    rate_limit_burst: int = Field(default=50, ge=1, description="Requests a key may make at once.")
    auth_failure_rate_per_second: float = Field(
        default=0.5,
        ge=0,
        description="Failed authentications per second per client address, on average, "
        "once the burst is spent; more are answered 429 without a key lookup (0: no limit).",
    )
    auth_failure_burst: int = Field(
        default=20, ge=1, description="Failed authentications a client address may make at once."
    )
    key_cache_s: float = Field(
        default=1.0,
        ge=0,
        le=60,
        description="memstrata serve: seconds a server keeps a key it has checked before "
        "checking it again; a key revoked, expired or deleted by another process (the CLI, "
        "another replica) is refused within this time. A new key works at once; a user "
        "deleted through this server is refused at once (0: look every key up).",
    )
    serve_http: Literal["auto", "httptools", "h11"] = Field(
        default="auto",
        description="memstrata serve: the HTTP parser; auto is httptools (C, installed by the "
        "server extra) when present, else h11 (pure Python, a few times the CPU per request).",
    )
    serve_header_timeout_s: float = Field(
        default=10.0,
        gt=0,
        description="memstrata serve: seconds a connection may take to send a request's "
        "headers (from connect, or from the previous answer); then it is closed.",
    )
    serve_body_timeout_s: float = Field(
        default=30.0,
        gt=0,
        description="memstrata serve: seconds a request may take to send its body after its "
        "headers; then the connection is closed.",
    )
    serve_keepalive_s: int = Field(
        default=5,
        ge=1,
        description="memstrata serve: seconds an idle keep-alive connection stays open.",
    )
    serve_max_connections: int = Field(
        default=1000,
        ge=1,
        description="memstrata serve: open connections per process; a request on one more is "
        "answered 503 and its connection closed.",
    )
    serve_max_connections_per_address: int = Field(
        default=100,
        ge=0,
        description="memstrata serve: open connections per client address; one more has a "
        "second to send its request, answered 429 and closed (past twice this, closed at "
        "once). Behind a reverse proxy every client shares its address: raise this, or 0 "
        "for no cap.",
    )
    serve_store_check_s: float = Field(
        default=2.0,
        ge=0,
        description="memstrata serve on a SQLite file: how often the database, -wal and -shm "
        "are checked to be writable; once one is not, the server logs which and stops "
        "cleanly, before sqlite's memory map of -shm could kill it (0: no check).",
    )
    serve_log_interval_s: float = Field(
        default=10.0,
        gt=0,
        description="memstrata serve: a repeated connection-level error (such as 'Too many open "
        "files' on accept) is logged at most once per this many seconds, with a count.",
    )
    log_format: Literal["json", "text"] = Field(
        default="json", description="memstrata serve / worker logs: JSON lines or plain text."
    )
    log_level: str = Field(default="INFO", description="Level of memstrata's own logs.")
    redact: str = Field(
        default="",
        description="Built-in kinds to redact before text reaches the LLM or the long-term "
        "store, comma-separated: email, phone, secret.",
    )
    redact_patterns: list[str] = Field(
        default_factory=list,
        description="More regular expressions to redact (a JSON list in the environment).",
    )
    retention_interval_seconds: float = Field(
        default=3600.0,
        ge=0,
        description="How often the retention job applies the policies (0: only memstrata gc).",
    )
    context_record: bool = Field(
        default=False,
        description="Record every context assembly (prompt provenance) unless a call says "
        "record=False; default: only calls that ask (record=True).",
    )
    context_layout: Literal["cache", "classic"] = Field(
        default="cache",
        description="The order of a context's messages: `cache` (volatile tiers after the "
        "window's stable part, a window that advances in steps: a prefix providers can cache) "
        "or `classic` (every injected block before a sliding window). A call's `layout` wins.",
    )
    context_low_water: float = Field(
        default=0.7,
        gt=0,
        lt=1,
        description="Under the cache layout, the share of the window's tokens kept right after "
        "it steps forward (its start then stays put until the next step).",
    )
    longterm_capture: bool | Literal["auto"] = Field(
        default="auto",
        description="Queue long-term extraction as user messages and final replies are appended: "
        "`auto` (the default) is on when an LLM is configured and off otherwise, as DeerFlow "
        "extracts whenever it has a model; `true` / `false` force it (off: only explicit "
        "mem.longterm.observe calls and POST /v1/conversations/{cid}/observe).",
    )
    longterm_debounce_seconds: float = Field(
        default=30.0,
        ge=1,
        le=300,
        description="Quiet time after the newest message of a conversation before extraction runs.",
    )
    longterm_max_wait_seconds: float = Field(
        default=300.0,
        ge=1,
        le=3600,
        description="Longest a conversation's extraction is postponed by steady traffic.",
    )
    longterm_max_facts: int = Field(default=100, ge=10, le=500, description="Active facts kept.")
    longterm_confidence_threshold: float = Field(default=0.7, ge=0, le=1)
    longterm_max_llm_calls: int = Field(
        default=2, ge=1, le=5, description="Model calls per update (the first plus repair retries)."
    )
    longterm_max_input_tokens: int = Field(
        default=6000, ge=500, le=100_000, description="Newest conversation tokens one update reads."
    )
    longterm_lease_seconds: float = Field(
        default=300.0,
        ge=1,
        le=3600,
        description="Lease of a running extraction: a worker that dies mid-call gives the job "
        "back after this long.",
    )
    longterm_max_attempts: int = Field(
        default=5, ge=1, le=20, description="Attempts of an extraction job before it is dead."
    )
    longterm_branch_withdraw: bool = Field(
        default=True,
        description="Withdraw a fact once every message it came from is off its "
        "conversation's active branch (regenerated away, edited away, deleted): superseded "
        "with reason branch_abandoned, restored when its branch is active again (off: facts "
        "stay as extracted).",
    )

    encrypt_at_rest: bool = Field(
        default=False,
        description="Seal every user's stored texts with that user's data key (AES-256-GCM); "
        "deleting the user destroys the key, so earlier backups no longer open either. "
        "Needs MEMSTRATA_MASTER_KEY_FILE (see docs/operations.md).",
    )
    master_key_file: Path | None = Field(
        default=None,
        description="The master key that wraps the data keys (`memstrata master-key create "
        "--out FILE`); kept apart from the store and its backups.",
    )
    keyring: str | None = Field(
        default=None,
        description="Where the wrapped data keys live: a directory (default: keyring under "
        "home), or a postgresql:// URL of a database of its own; never inside the store's "
        "database or its backups.",
    )

    def database_url(self) -> str:
        return self.db or f"sqlite:///{(self.home / 'memstrata.db').as_posix()}"

    def blobs_url(self) -> str:
        return self.blobs or f"file://{(self.home / 'blobs').resolve().as_posix()}"
