"""The ``memstrata`` command line: serve, keys, migrate, doctor, worker, search, reindex,
compact, gc, bench; facts, jobs, export and import live in :mod:`memstrata.cli_longterm`.

Tables are for people; ``--json`` is for scripts. Errors print one line on
stderr and exit 1 (2 for a wrong command line). Commands that print a value a
script captures (``keys create``) print only that value on stdout.
"""

from __future__ import annotations

import json
import os
import platform
import sqlite3
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Annotated, Any, NoReturn

import typer
from rich.console import Console

from memstrata.api import Memory
from memstrata.backends.registry import redact, sqlite_path
from memstrata.cli_tables import new_table
from memstrata.config import Settings
from memstrata.errors import (
    ConfigurationError,
    InvalidInput,
    MemstrataError,
    MissingDependency,
)
from memstrata.logs import configure_logging
from memstrata.storage.tenancy import ApiKey

__all__ = ["app", "main"]

app = typer.Typer(
    name="memstrata",
    help="memstrata: a memory layer for LLM chat apps and agents.",
    no_args_is_help=True,
    add_completion=False,
    pretty_exceptions_enable=False,
)


def _print_version(value: bool) -> None:
    if value:
        from memstrata import __version__

        typer.echo(f"memstrata {__version__}")
        raise typer.Exit()


@app.callback()
def _root(
    version: Annotated[
        bool,
        typer.Option(
            "--version",
            callback=_print_version,
            is_eager=True,
            help="Print the version and exit.",
        ),
    ] = False,
) -> None:
    """memstrata: a memory layer for LLM chat apps and agents."""


keys_app = typer.Typer(help="Create, list and revoke API keys.", no_args_is_help=True)
app.add_typer(keys_app, name="keys")

Db = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="Database URL (default: SQLite under MEMSTRATA_HOME, ./.memstrata).",
        show_default=False,
    ),
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]

TOKENIZER_SAMPLE = "memstrata counts tokens offline: héllo wörld, 你好, 12345 🚀"


def _note(message: str) -> None:
    """A line for people on stderr, so stdout stays clean for scripts."""
    typer.echo(message, err=True)


def _fail(message: str) -> NoReturn:
    _note(f"error: {' '.join(message.split())}")
    raise typer.Exit(1)


@contextmanager
def _errors() -> Iterator[None]:
    """A memstrata error becomes one line on stderr and exit status 1."""
    try:
        yield
    except MemstrataError as exc:
        _fail(exc.message)
    except OSError as exc:  # e.g. a database path that cannot be created
        _fail(str(exc))


def _settings(db: str | None) -> Settings:
    problem = _db_problem(db) if db else None
    if problem:
        _fail(problem)
    settings = Settings()
    return settings.model_copy(update={"db": db or settings.database_url()})


_SCHEMES = ("sqlite", "postgresql", "postgres")


def _db_problem(db: str) -> str | None:
    """What is wrong with a --db URL before anything is opened, or None.

    A mistyped --db must be one line on stderr that creates nothing: no stray database in
    a directory made up on the way, no traceback.
    """
    scheme = db.split(":", 1)[0].lower() if "://" in db else None
    if scheme is None:
        hint = f"sqlite:///{db}" if ":" not in db else "sqlite:///path/to/file.db"
        return f"--db takes a database URL, not {db!r}: e.g. {hint} or postgresql://host/db"
    if scheme not in _SCHEMES:
        return f"unknown database URL scheme {scheme!r} in --db (use sqlite or postgresql)"
    if scheme == "sqlite":
        try:
            path = sqlite_path(db)
        except ConfigurationError as exc:
            return exc.message
        if path is not None and not path.parent.is_dir():
            return f"--db: the directory {str(path.parent)!r} does not exist; create it first"
    return None


def _open(db: str | None) -> Memory:
    """The store, for a short-lived command: it queues background work and leaves it to
    ``memstrata serve`` or ``memstrata worker`` (no worker thread that exits with it)."""
    settings = _settings(db).model_copy(update={"worker": "off"})
    return Memory.open(settings.database_url(), settings=settings)


# -- serve -----------------------------------------------------------------------------------


@app.command()
def serve(
    host: Annotated[str, typer.Option(help="Address to listen on.")] = "127.0.0.1",
    port: Annotated[int, typer.Option(help="Port to listen on.", min=1, max=65535)] = 8700,
    db: Db = None,
    processes: Annotated[
        int,
        typer.Option(
            "--processes",
            min=1,
            help="Server processes sharing the port. One process uses one core (Python's "
            "GIL); several share the store through SQLite's WAL or PostgreSQL, and their "
            "job workers through leases.",
        ),
    ] = 1,
    no_worker: Annotated[
        bool,
        typer.Option(
            "--no-worker",
            help="Run no job worker in the server (then run `memstrata worker` processes). "
            "By default the server runs one, on PostgreSQL too: leases keep it safe beside "
            "worker processes.",
        ),
    ] = False,
) -> None:
    """Run the REST server, web UI and MCP endpoint (migrates first; on a new SQLite store,
    prints a key for the local user; on PostgreSQL, how to make one)."""
    with _errors():
        settings = _settings(db).model_copy(update={"host": host, "port": port})
        settings = settings.model_copy(update={"worker": _serve_worker(settings, no_worker)})
        if processes > 1:
            _check_shareable(settings)
        try:
            import uvicorn

            from memstrata.server import create_app
            from memstrata.server.serving import GuardedH11Protocol, ServeLimits
        except ImportError as exc:
            raise MissingDependency(
                f"the server needs its extra: pip install 'memstrata[server]' ({exc})"
            ) from None
        with Memory.open(settings.database_url(), settings=settings) as mem:
            if not mem.keys.list(settings.local_tenant):
                _first_start(mem, settings)
        _note(f"memstrata serving {redact(settings.database_url())} on http://{host}:{port}")
        for line in _serve_urls(host, port, settings):
            _note(line)
        configure_logging(json_logs=settings.log_format == "json", level=settings.log_level)
        # memstrata's access log (with request ids) replaces uvicorn's.
        GuardedH11Protocol.use(ServeLimits.from_settings(settings))
        options: dict[str, Any] = {
            "host": host,
            "port": port,
            "log_level": settings.log_level.lower(),
            "access_log": False,
            "log_config": None,
            # Header and body deadlines, a connection cap, problem JSON for bad HTTP.
            "http": GuardedH11Protocol,
            "timeout_keep_alive": settings.serve_keepalive_s,
        }
        if processes == 1:
            uvicorn.run(create_app(settings=settings), **options)
            return
        # Each process is started afresh and builds its app from the environment: the
        # database as resolved here (--db included), everything else as this process sees it.
        os.environ["MEMSTRATA_DB"] = settings.database_url()
        os.environ["MEMSTRATA_WORKER"] = settings.worker
        uvicorn.run(
            "memstrata.server.app:app_from_environment",
            factory=True,
            workers=processes,
            # A process imports and opens the store before it answers the supervisor's
            # first health check: on a loaded machine that takes longer than uvicorn's 5 s.
            timeout_worker_healthcheck=30,
            **options,
        )


def _first_start(mem: Memory, settings: Settings) -> None:
    """No key yet. The embedded SQLite store is one person's: print a key for its local
    user. A PostgreSQL store is shared and its log is read by others: print how to make
    a key instead of a working one."""
    if settings.database_url().split(":", 1)[0].lower() != "sqlite":
        typer.echo(
            "\nNo API key exists yet. Create one (shown only once) with:\n\n"
            f"    memstrata keys create --tenant {settings.local_tenant} "
            f"--user {settings.local_user}\n"
        )
        return
    _, secret = mem.keys.create(
        settings.local_tenant, user=settings.local_user, label="first start"
    )
    typer.echo(
        f"\nFirst start: created an API key for tenant {settings.local_tenant!r}, "
        f"user {settings.local_user!r}.\n"
        "It is shown only this once; keep it:\n\n"
        f"    {secret}\n\n"
        "Send it as: Authorization: Bearer <key>\n"
    )


def _serve_worker(settings: Settings, no_worker: bool) -> str:
    """The server's worker mode: off with --no-worker, else a worker thread on every
    store (``auto`` alone runs none on PostgreSQL, where jobs would wait unseen)."""
    if no_worker:
        return "off"
    return "thread" if settings.worker == "auto" else settings.worker


def _serve_urls(host: str, port: int, settings: Settings) -> list[str]:
    """Where to point a client, a browser and an MCP host; and who runs the jobs."""
    import importlib.util

    shown = "localhost" if host in ("127.0.0.1", "0.0.0.0", "::", "") else host
    base = f"http://{shown}:{port}"
    mcp = (
        f"{base}/mcp"
        if importlib.util.find_spec("mcp") is not None
        else "off (pip install 'memstrata[mcp]')"
    )
    jobs = {
        "off": "no worker in this server: run `memstrata worker` beside it",
        "thread": "a worker thread in this server",
    }.get(settings.worker, "a worker thread when there are jobs (SQLite)")
    return [
        f"  REST  {base}/v1   (OpenAPI: {base}/openapi.json)",
        f"  UI    {base}/",
        f"  MCP   {mcp}",
        f"  jobs  {jobs}",
    ]


def _check_shareable(settings: Settings) -> None:
    """Several processes need a store they can all reach: not one held in a process's memory."""
    url = settings.database_url()
    if url.split(":", 1)[0].lower() == "sqlite" and sqlite_path(url) is None:
        raise ConfigurationError(
            f"--processes needs a database every process can open; {url!r} lives in one "
            "process's memory (give a SQLite file or PostgreSQL)"
        )
    if settings.blobs_url().startswith("memory://"):
        raise ConfigurationError(
            "--processes needs node-memory storage every process can reach; memory:// lives "
            "in one process (use file:// or s3://)"
        )


# -- keys ------------------------------------------------------------------------------------


def _key_dict(key: ApiKey) -> dict[str, Any]:
    return {
        "id": key.id,
        "tenant": key.tenant,
        "user": key.user,
        "admin": key.admin,
        "label": key.label,
        "created_at": key.created_at.isoformat(),
        "revoked_at": None if key.revoked_at is None else key.revoked_at.isoformat(),
        "expires_at": None if key.expires_at is None else key.expires_at.isoformat(),
    }


ExpiresIn = Annotated[
    str | None,
    typer.Option(
        "--expires-in",
        help="The key stops working after this long, e.g. 90d, 12h (default: never).",
        show_default=False,
    ),
]


def _expiry(expires_in: str | None) -> datetime | None:
    if expires_in is None:
        return None
    return datetime.now(UTC) + timedelta(seconds=_duration(expires_in))


@keys_app.command("create")
def keys_create(
    tenant: Annotated[str, typer.Option("--tenant", help="Tenant the key belongs to.")],
    user: Annotated[
        str | None, typer.Option("--user", help="User the key acts as.", show_default=False)
    ] = None,
    admin: Annotated[
        bool, typer.Option("--admin", help="An admin key for the tenant instead.")
    ] = False,
    label: Annotated[
        str | None, typer.Option("--label", help="A note to recognise the key by.")
    ] = None,
    expires_in: ExpiresIn = None,
    db: Db = None,
) -> None:
    """Create a key and print only the key on stdout (it is never shown again)."""
    if admin == (user is not None):
        raise typer.BadParameter(
            "give exactly one of --user U or --admin", param_hint="--user / --admin"
        )
    with _errors(), _open(db) as mem:
        key, secret = mem.keys.create(
            tenant, user=user, admin=admin, label=label, expires_at=_expiry(expires_in)
        )
    who = "admin" if admin else f"user {user!r}"
    _note(f"created key {key.id} for tenant {tenant!r}, {who}")
    typer.echo(secret)


@keys_app.command("list")
def keys_list(
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="Only this tenant's keys.", show_default=False)
    ] = None,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """List keys (never their secrets)."""
    with _errors(), _open(db) as mem:
        keys = mem.keys.list(tenant)
    if as_json:
        typer.echo(json.dumps([_key_dict(k) for k in keys], indent=2))
        return
    table = new_table("id", "tenant", "user", "admin", "label", "created", "revoked")
    for k in keys:
        table.add_row(
            k.id,
            k.tenant,
            k.user or "",
            "yes" if k.admin else "",
            k.label or "",
            k.created_at.strftime("%Y-%m-%d %H:%M:%S"),
            "" if k.revoked_at is None else k.revoked_at.strftime("%Y-%m-%d %H:%M:%S"),
        )
    Console().print(table)


@keys_app.command("revoke")
def keys_revoke(
    key_id: Annotated[str, typer.Argument(help="The key id (from 'keys list').")],
    db: Db = None,
) -> None:
    """Revoke a key; it is refused at once, also by a running server."""
    with _errors(), _open(db) as mem:
        mem.keys.revoke(key_id)
    typer.echo(f"revoked key {key_id}")


@keys_app.command("rotate")
def keys_rotate(
    key_id: Annotated[str, typer.Argument(help="The live key to replace (from 'keys list').")],
    expires_in: ExpiresIn = None,
    db: Db = None,
) -> None:
    """Replace a key: print only the new key on stdout; the old one is refused at once."""
    with _errors(), _open(db) as mem:
        key, secret = mem.keys.rotate(key_id, expires_at=_expiry(expires_in))
    _note(f"revoked key {key_id}; created key {key.id} in its place")
    typer.echo(secret)


# -- migrate / doctor ------------------------------------------------------------------------


def _migrations(dialect: str) -> list[tuple[int, str]]:
    from memstrata.storage.schema import MIGRATIONS

    return [(m.version, m.name) for m in MIGRATIONS.get(dialect, ())]


def _latest_schema(dialect: str) -> int:
    return max((v for v, _ in _migrations(dialect)), default=0)


@app.command()
def migrate(db: Db = None) -> None:
    """Apply pending schema migrations and print the versions in place."""
    settings = _settings(db)
    with _errors(), _open(db) as mem:
        engine = mem.core.engine
        # Opening the store applies pending migrations; this call picks up any that
        # another process added meanwhile, and reports the result.
        engine.migrate()
        version = engine.schema_version()
        known = _migrations(engine.dialect)
    typer.echo(f"database: {redact(settings.database_url())}")
    for number, name in known:
        if number <= version:
            typer.echo(f"  applied {number}: {name}")
    typer.echo(f"schema version: {version}")


def probe(db: str | None, info: dict[str, Any], read: Callable[[Memory], dict[str, Any]]) -> bool:
    """Open the memory and add what ``read`` finds to ``info``; False (and ``info["error"]``)
    when it cannot be opened or read."""
    try:
        with _open(db) as mem:
            info.update(read(mem))
    except MemstrataError as exc:
        info["error"] = exc.message
        return False
    except OSError as exc:
        info["error"] = str(exc)
        return False
    return True


def _schema_info(mem: Memory) -> dict[str, Any]:
    engine = mem.core.engine
    return {
        "dialect": engine.dialect,
        "schema_version": engine.schema_version(),
        "latest_schema_version": _latest_schema(engine.dialect),
    }


def _check_database(db: str | None) -> dict[str, Any]:
    url = _settings(db).database_url()
    info: dict[str, Any] = {"url": redact(url), "ok": False}
    if not probe(db, info, _schema_info):
        return info
    if info["schema_version"] > info["latest_schema_version"]:
        info["error"] = "the database was written by a newer memstrata"
    else:
        info["ok"] = True
    return info


def _check_tokenizer() -> dict[str, Any]:
    from memstrata.tokens import get_encoding

    info: dict[str, Any] = {"ok": True, "offline": True, "sample": TOKENIZER_SAMPLE, "counts": {}}
    for name in ("o200k_base", "cl100k_base"):
        try:
            encoding = get_encoding(name)
            if encoding.name != name:
                raise RuntimeError(f"fell back to {encoding.name}")
            info["counts"][name] = encoding.count(TOKENIZER_SAMPLE)
        except Exception as exc:  # any failure here is what doctor must report
            info["ok"] = False
            info.setdefault("errors", {})[name] = str(exc)
    return info


EMBEDDER_SAMPLE = "memstrata recalls past conversations offline."


def _check_embedder() -> dict[str, Any]:
    """The embedder's state. A default embedder that cannot run here is a warning with the
    command that fixes it (recall still works on keywords), not a failure."""
    import math
    import time

    from memstrata.embeddings.registry import EmbedSettings, get_embedder

    info: dict[str, Any] = {
        "ok": False,
        "dim": None,
        "identity": None,
        "backend": None,
        "warnings": [],
    }
    try:
        settings = EmbedSettings()
        info["kind"] = settings.embedder
        info["offline"] = settings.embedder == "default" or (
            settings.embedder == "sentence-transformers"
            and Path(settings.embed_model or "").is_dir()
        )
        embedder = get_embedder(settings)
        if embedder is None:
            info.update(ok=True, status="none (keyword recall only)")
            return info
        started = time.perf_counter()
        vector = embedder.embed([EMBEDDER_SAMPLE])[0]
        info["first_embed_seconds"] = round(time.perf_counter() - started, 3)
        info["identity"] = embedder.identity
        info["dim"] = embedder.dim
        info["sample_norm"] = round(math.sqrt(sum(x * x for x in vector)), 6)
        backend = getattr(embedder, "backend", None)
        if isinstance(backend, str):
            info["backend"] = backend
        if len(vector) != info["dim"]:
            raise RuntimeError(f"embedded {len(vector)} dimensions, expected {info['dim']}")
        info["ok"] = True
        info["status"] = info["identity"]
    except MissingDependency as exc:
        if info.get("kind") != "default":
            info["error"] = exc.message
            info["status"] = f"FAILED: {exc.message}"
            return info
        # A plain install: recall works on keywords; say how to get semantic recall.
        info.update(ok=True, status="keyword recall only (no semantic search)")
        info["warnings"].append(f"recall runs on keywords alone: {exc.message}")
    except Exception as exc:  # any failure here is what doctor must report
        info["error"] = " ".join(str(exc).split())
        info["status"] = f"FAILED: {info['error']}"
    return info


def _check_workers(db: str | None) -> dict[str, Any]:
    """Due jobs with no worker seen lately: a warning (they wait, nothing is lost)."""
    info: dict[str, Any] = {"ok": False}
    if not probe(db, info, lambda mem: mem.jobs.presence().to_dict()):
        return info
    info["ok"] = True
    info["warnings"] = [info["warning"]] if info["warning"] else []
    return info


def _worker_rows(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    info = report["workers"]
    if not info["ok"]:
        return [("workers", "FAILED", info.get("error", ""))]
    if info["warning"]:
        return [("workers", "warning", info["warning"])]
    seen = info["last_seen_s"]
    detail = f"{info['live_workers']} live; {info['due']} job(s) due" + (
        "" if seen is None else f"; last heartbeat {seen} s ago"
    )
    return [("workers", "ok", detail)]


def _diagnose(db: str | None) -> dict[str, Any]:
    from memstrata import __version__

    problem = _db_problem(db) if db else None
    unopened = {"ok": False, "error": f"database not opened: {problem}"}
    report: dict[str, Any] = {
        "python": platform.python_version(),
        "memstrata": __version__,
        "sqlite": sqlite3.sqlite_version,
        # A bad --db is reported, and nothing is opened (or created) for it.
        "database": {"url": redact(db), "ok": False, "error": problem}
        if db and problem
        else _check_database(db),
        "tokenizer": _check_tokenizer(),
        "embedder": _check_embedder(),
        "longterm": dict(unopened) if problem else cli_longterm.check_longterm(db),
        "workers": dict(unopened) if problem else _check_workers(db),
    }
    report["ok"] = all(
        part["ok"] for part in report.values() if isinstance(part, dict) and "ok" in part
    )
    return report


def _print_diagnosis(report: dict[str, Any]) -> None:
    database = report["database"]
    tokenizer = report["tokenizer"]
    table = new_table("check", "status", "detail")
    table.add_row("python", "ok", report["python"])
    table.add_row("memstrata", "ok", report["memstrata"])
    table.add_row("sqlite", "ok", report["sqlite"])
    detail = database["url"]
    if "schema_version" in database:
        detail += f" (schema {database['schema_version']} of {database['latest_schema_version']})"
    if "error" in database:
        detail += f": {database['error']}"
    table.add_row("database", "ok" if database["ok"] else "FAILED", detail)
    counts = ", ".join(f"{k} {v}" for k, v in tokenizer["counts"].items())
    errors = "; ".join(f"{k}: {v}" for k, v in tokenizer.get("errors", {}).items())
    table.add_row(
        "tokenizer",
        "ok" if tokenizer["ok"] else "FAILED",
        f"offline; sample tokens: {counts}" + (f"; {errors}" if errors else ""),
    )
    embedder = report["embedder"]
    detail = embedder["status"]
    if embedder["ok"] and embedder["dim"]:
        detail = (
            f"{embedder['kind']}: {embedder['identity']}"
            + (f" via {embedder['backend']}" if embedder["backend"] else "")
            + f"; {'offline' if embedder['offline'] else 'needs its server'}"
            + f"; sample norm {embedder['sample_norm']}, first embed {embedder['first_embed_seconds']} s"
        )
    status = "FAILED" if not embedder["ok"] else "warning" if embedder["warnings"] else "ok"
    table.add_row("embedder", status, "; ".join([detail, *embedder["warnings"]]))
    table.add_row(*cli_longterm.longterm_row(report["longterm"]))
    for extra in _worker_rows(report):
        table.add_row(*extra)
    # Details hold paths, URLs and install commands ("memstrata[embed]"): text, never markup.
    Console(highlight=False).print(table)


@app.command()
def doctor(db: Db = None, as_json: JsonFlag = False) -> None:
    """Check the installation: versions, database, offline tokenizer, embedder, long-term
    extraction (disabled without an LLM: a warning, not a failure)."""
    report = _diagnose(db)
    if as_json:
        typer.echo(json.dumps(report, indent=2, ensure_ascii=False))
    else:
        _print_diagnosis(report)
    if not report["ok"]:
        raise typer.Exit(1)


# -- recall ----------------------------------------------------------------------------------


@app.command()
def search(
    query: Annotated[str, typer.Argument(help="What to look for.")],
    tenant: Annotated[str | None, typer.Option("--tenant", help="Tenant (default: local).")] = None,
    user: Annotated[str | None, typer.Option("--user", help="User (default: local).")] = None,
    agent: Annotated[
        str | None, typer.Option("--agent", help="Only this agent's messages.")
    ] = None,
    k: Annotated[int, typer.Option("-k", "--k", help="How many messages.", min=1, max=200)] = 10,
    conversation: Annotated[
        str | None, typer.Option("--conversation", help="Only this conversation.")
    ] = None,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """Search a user's past messages (hybrid keyword + semantic recall)."""
    from memstrata.types import Scope

    settings = _settings(db)
    with _errors(), _open(db) as mem:
        scope = Scope(tenant or settings.local_tenant, user or settings.local_user, agent)
        hits = mem.recall.search(scope, query, k=k, conversation_id=conversation)
    if as_json:
        typer.echo(json.dumps({"hits": [h.to_dict() for h in hits]}, indent=2, ensure_ascii=False))
        return
    table = new_table("score", "conversation", "role", "when", "message")
    for h in hits:
        text = h.message.content.replace("\n", " ")
        table.add_row(
            f"{h.score:.4f}",
            h.conversation_id[-12:],
            h.message.role.value,
            h.message.occurred_at.strftime("%Y-%m-%d %H:%M"),
            text if len(text) <= 100 else text[:99] + "…",
        )
    Console().print(table)


@app.command()
def reindex(
    db: Db = None,
    as_json: JsonFlag = False,
) -> None:
    """Bring recall's indexes up to date: keyword rows for messages stored before recall,
    and vectors of the current embedder for every message (after changing embedders)."""
    from rich.progress import Progress

    with _errors(), _open(db) as mem:
        emb = mem.core.recall.embedder
        backfilled = mem.recall.backfill()
        todo = mem.recall.pending()
        with Progress(transient=True, disable=as_json) as bar:
            task = bar.add_task(f"embedding with {emb.identity if emb else '-'}", total=todo)
            done = mem.recall.flush(reindex=True, progress=lambda n: bar.advance(task, n))
    result = {
        "embedder": emb.identity if emb else None,
        "keyword_rows_added": backfilled,
        "embedded": done,
    }
    if as_json:
        typer.echo(json.dumps(result, indent=2))
    else:
        typer.echo(
            f"keyword rows added: {backfilled}; embedded: {done} "
            f"({result['embedder'] or 'no embedder: keyword recall only'})"
        )


# -- worker ----------------------------------------------------------------------------------


@app.command()
def worker(
    db: Db = None,
    threads: Annotated[
        int, typer.Option(help="Jobs run at once in this process.", min=1, max=64)
    ] = 2,
    once: Annotated[
        bool, typer.Option("--once", help="Run what is due now, then exit (for cron and tests).")
    ] = False,
) -> None:
    """Run background jobs (compaction, extraction, reindexing, gc) until SIGTERM or Ctrl-C.

    Running jobs finish before it exits; a worker killed outright loses nothing: its
    jobs are reclaimed by another worker when their leases run out.
    """
    import signal
    import threading

    with _errors():
        settings = _settings(db).model_copy(update={"worker": "off"})
        configure_logging(json_logs=settings.log_format == "json", level=settings.log_level)
        mem = Memory.open(settings.database_url(), settings=settings)
        try:
            kinds = mem.core.jobs.kinds()
            if once:
                ran = mem.jobs.run_pending()
                _note(f"ran {ran} job(s)")
                return
            stop = threading.Event()
            for sig in (signal.SIGTERM, signal.SIGINT):
                signal.signal(sig, lambda *_: stop.set())
            runner = mem.core.worker()
            runner.start(threads=threads)
            _note(
                f"worker {runner.name} on {redact(settings.database_url())}: {threads} thread(s), "
                f"kinds: {', '.join(kinds) or '(none registered yet)'}"
            )
            stop.wait()
            _note("stopping: letting running jobs finish")
            runner.stop()
        finally:
            mem.close()


def _parse_sizes(values: list[str] | None) -> list[int] | None:
    if not values:
        return None
    sizes: list[int] = []
    for value in values:
        for part in value.split(","):
            part = part.strip().replace("_", "")
            if not part:
                continue
            if not part.isdigit() or int(part) < 1:
                raise typer.BadParameter(
                    f"{part!r} is not a positive integer", param_hint="--sizes"
                )
            sizes.append(int(part))
    return sizes or None


@app.command()
def bench(
    name: Annotated[str, typer.Argument(help="Benchmark name, e.g. history.")],
    out: Annotated[
        Path | None, typer.Option("--out", help="Write the JSON result here.", show_default=False)
    ] = None,
    db: Annotated[
        str | None,
        typer.Option("--db", help="Database URL to measure (default: a fresh temporary store)."),
    ] = None,
    sizes: Annotated[
        list[str] | None,
        typer.Option("--sizes", help="Sizes to measure, e.g. --sizes 1000,10000 (repeatable)."),
    ] = None,
    data: Annotated[
        Path | None,
        typer.Option(
            "--data",
            help="Data set of the benchmark (locomo, context-quality, peers: the LoCoMo JSON file).",
        ),
    ] = None,
    runs: Annotated[
        int | None,
        typer.Option("--runs", min=1, help="Repeated runs whose median is reported (peers)."),
    ] = None,
    time_limit: Annotated[
        float | None,
        typer.Option(
            "--time-limit",
            min=1,
            help="Seconds of appends after which a system is reported as 'over' (peers); "
            "seconds of load per operation (serve).",
        ),
    ] = None,
    processes: Annotated[
        int | None,
        typer.Option("--processes", min=1, help="Server processes (load, serve)."),
    ] = None,
) -> None:
    """Run a benchmark: prints a table and writes the JSON envelope with --out."""
    parsed = _parse_sizes(sizes)
    with _errors():
        try:
            from memstrata.bench import run_bench
        except ImportError as exc:
            raise MissingDependency(f"benchmarks are not available: {exc}") from None
        run_bench(
            name,
            out=out,
            db=db,
            sizes=parsed,
            data=data,
            runs=runs,
            time_limit=time_limit,
            processes=processes,
        )


# -- node memory -----------------------------------------------------------------------------

_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def _duration(text: str) -> float:
    """``30d``, ``12h``, ``90m``, ``45s`` or plain seconds."""
    t = text.strip().lower()
    unit = _UNITS.get(t[-1:]) if t else None
    number = t[:-1] if unit else t
    try:
        value = float(number) * (unit or 1)
    except ValueError:
        raise typer.BadParameter(f"not a duration: {text!r} (e.g. 30d, 12h, 90m)") from None
    if value < 0:
        raise typer.BadParameter("a duration cannot be negative")
    return value


@app.command()
def gc(
    node_memory: Annotated[
        bool, typer.Option("--node-memory", help="Delete node memories not written lately.")
    ] = False,
    older_than: Annotated[
        str, typer.Option("--older-than", help="With --node-memory: age of the last write.")
    ] = "30d",
    conversations_idle: Annotated[
        str | None,
        typer.Option(
            "--conversations-idle",
            help="Delete conversations idle this long (90d).",
            show_default=False,
        ),
    ] = None,
    jobs_done: Annotated[
        str | None,
        typer.Option(
            "--jobs-done", help="Delete jobs finished this long ago (7d).", show_default=False
        ),
    ] = None,
    checkpoints_expired: Annotated[
        str | None,
        typer.Option(
            "--checkpoints-expired",
            help="Delete checkpoints expired this long ago.",
            show_default=False,
        ),
    ] = None,
    snapshots_idle: Annotated[
        str | None,
        typer.Option(
            "--snapshots-idle",
            help="Delete run snapshots not updated this long.",
            show_default=False,
        ),
    ] = None,
    policies: Annotated[
        bool, typer.Option("--policies", help="Apply the stored retention policies.")
    ] = False,
    dry_run: Annotated[
        bool, typer.Option("--dry-run", help="Count what would go; delete nothing.")
    ] = False,
    tenant: Annotated[
        str | None, typer.Option("--tenant", help="Only this tenant.", show_default=False)
    ] = None,
    blobs: Annotated[
        str | None,
        typer.Option(
            "--blobs",
            help="Blob store URL (default: MEMSTRATA_BLOBS or files under home).",
            show_default=False,
        ),
    ] = None,
    db: Db = None,
    as_json: JsonFlag = False,
) -> None:
    """Delete stored data past its retention: by the stored policies (--policies), or by the
    ages given here; deletions go through the cascades, so nothing derived is left behind."""
    overrides = {
        kind: _duration(age)
        for kind, age in (
            ("conversations", conversations_idle),
            ("jobs", jobs_done),
            ("checkpoints", checkpoints_expired),
            ("snapshots", snapshots_idle),
        )
        if age is not None
    }
    if node_memory and not overrides and not policies:
        _gc_node_memory(_duration(older_than), older_than, dry_run, tenant, blobs, db, as_json)
        return
    if node_memory:
        overrides["node_memories"] = _duration(older_than)
    if not overrides and not policies:
        raise typer.BadParameter(
            "choose what to collect: --policies, --conversations-idle, --jobs-done, "
            "--checkpoints-expired, --snapshots-idle or --node-memory"
        )
    from rich.progress import Progress

    with _errors():
        mem = _open_with_blobs(db, blobs)
        try:
            with Progress(console=Console(stderr=True), transient=True) as bar:
                task = bar.add_task("gc", total=None)

                def step(kind: str, done: int) -> None:
                    bar.update(task, description=f"gc {kind}", completed=done)

                counts: dict[str, int] = {}
                if policies:
                    counts = mem.retention.apply(dry_run=dry_run, tenant=tenant, progress=step)
                if overrides:
                    more = mem.retention.apply(
                        overrides=overrides, dry_run=dry_run, tenant=tenant, progress=step
                    )
                    counts = {k: counts.get(k, 0) + more[k] for k in more}
        finally:
            mem.close()
    if as_json:
        typer.echo(json.dumps({"dry_run": dry_run, "counts": counts}))
        return
    verb = "would delete" if dry_run else "deleted"
    typer.echo(
        ", ".join(f"{verb} {n} {kind}" for kind, n in counts.items() if n or kind in overrides)
    )


def _open_with_blobs(db: str | None, blobs: str | None) -> Memory:
    settings = _settings(db).model_copy(update={"worker": "off"})
    if blobs:
        settings = settings.model_copy(update={"blobs": blobs})
    return Memory.open(settings.database_url(), blobs=settings.blobs, settings=settings)


def _gc_node_memory(
    seconds: float,
    older_than: str,
    dry_run: bool,
    tenant: str | None,
    blobs: str | None,
    db: str | None,
    as_json: bool,
) -> None:
    """``gc --node-memory`` alone: the node-memory report, with objects and bytes."""
    from rich.progress import Progress

    with _errors():
        mem = _open_with_blobs(db, blobs)
        try:
            with Progress(console=Console(stderr=True), transient=True) as bar:
                task = bar.add_task("node memories", total=None)

                def step(done: int, total: int) -> None:
                    bar.update(task, completed=done, total=total)

                report = mem.nodes.gc(seconds, dry_run=dry_run, tenant=tenant, progress=step)
        finally:
            mem.close()
    if as_json:
        typer.echo(json.dumps(report.to_dict()))
        return
    verb = "would delete" if dry_run else "deleted"
    typer.echo(
        f"{verb} {report.node_memories} node memories "
        f"({report.objects} objects, {report.bytes} bytes) last written over {older_than} ago"
    )


@app.command()
def backup(
    out: Annotated[Path, typer.Option("--out", help="The backup file to create.")],
    db: Db = None,
) -> None:
    """Back up the embedded SQLite store while it runs (PostgreSQL: use pg_dump; see
    docs/operations.md)."""
    from rich.progress import Progress

    from memstrata.backup import backup_sqlite

    with _errors():
        url = _settings(db).database_url()
        if not url.startswith("sqlite:///") or url.endswith(":memory:"):
            raise InvalidInput(
                "memstrata backup copies an SQLite file; back up PostgreSQL with pg_dump or "
                "base backups (docs/operations.md)",
                field="db",
            )
        with Progress(console=Console(stderr=True), transient=True) as bar:
            task = bar.add_task("backup", total=None)
            size = backup_sqlite(
                url.removeprefix("sqlite:///"),
                out,
                progress=lambda done, total: bar.update(task, completed=done, total=total),
            )
    typer.echo(f"backed up {redact(url)} to {out} ({size} bytes, integrity ok)")


# -- compaction ------------------------------------------------------------------------------


@app.command()
def compact(
    conversation_id: Annotated[str, typer.Argument(help="The conversation to compact.")],
    tenant: Annotated[str, typer.Option("--tenant", help="The conversation's tenant.")],
    user: Annotated[str, typer.Option("--user", help="The conversation's user.")],
    agent: Annotated[
        str | None, typer.Option("--agent", help="The conversation's agent.", show_default=False)
    ] = None,
    leaf: Annotated[
        str | None,
        typer.Option("--leaf", help="Compact this branch (default: active).", show_default=False),
    ] = None,
    as_json: JsonFlag = False,
    db: Db = None,
) -> None:
    """Summarise the older part of a conversation's branch now (the raw messages stay)."""
    from memstrata.types import Scope

    with _errors(), _open(db) as mem:
        result = mem.compact(Scope(tenant, user, agent), conversation_id, leaf_id=leaf)
    if as_json:
        typer.echo(json.dumps(result.to_dict(), indent=2))
        return
    summary = result.to_dict()["summary"]
    table = new_table("outcome", "reason", "covers up to", "version")
    table.add_row(
        result.outcome,
        result.reason or "",
        "" if not isinstance(summary, dict) else str(summary["up_to_message_id"]),
        "" if not isinstance(summary, dict) else str(summary["version"]),
    )
    Console().print(table)
    if result.outcome == "failed":
        raise typer.Exit(1)


# The other command modules add their commands to ``app`` as they load.
import memstrata.cli_data  # noqa: E402  (adds the data commands to ``app``)
import memstrata.cli_mcp  # noqa: E402  (adds ``memstrata mcp`` to ``app``)
import memstrata.cli_ops  # noqa: E402, F401  (adds ``memstrata retention`` to ``app``)
from memstrata import cli_longterm  # noqa: E402  (it imports this module's helpers)


def main() -> None:
    """Console entry point (``memstrata``)."""
    app()


if __name__ == "__main__":
    main()
