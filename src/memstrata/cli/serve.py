"""``memstrata serve``: the REST server, web UI and MCP endpoint, with a job worker.

On a new SQLite store it prints a key for the local user; on PostgreSQL, how to make one.
"""

from __future__ import annotations

import os
import shlex
import socket
from typing import Annotated, Any

import typer

from memstrata.api import Memory
from memstrata.backends.registry import redact, sqlite_path
from memstrata.cli._common import Db, errors, note, settings_for
from memstrata.config import Settings
from memstrata.errors import ConfigurationError, MissingDependency
from memstrata.logs import configure_logging

__all__ = ["serve"]


def serve(
    host: Annotated[
        str | None,
        typer.Option(
            help="Address to listen on (default: MEMSTRATA_HOST, else 127.0.0.1).",
            show_default=False,
        ),
    ] = None,
    port: Annotated[
        int | None,
        typer.Option(
            help="Port to listen on; 0 takes a free one (default: MEMSTRATA_PORT, else 8700).",
            min=0,
            max=65535,
            show_default=False,
        ),
    ] = None,
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
    with errors():
        settings = settings_for(db)
        host = settings.host if host is None else host
        port = settings.port if port is None else port
        settings = settings.model_copy(
            update={"host": host, "worker": _serve_worker(settings, no_worker)}
        )
        if processes > 1:
            _check_shareable(settings)
        try:
            import uvicorn

            from memstrata.server import create_app
            from memstrata.server.serving import ServeLimits, guarded_protocol
        except ImportError as exc:
            raise MissingDependency(
                f"the server needs its extra: pip install 'memstrata[server]' ({exc})"
            ) from None
        # Bound before the store is opened: a busy port fails fast and creates nothing,
        # and the banner shows the address the socket holds (port 0: the one given).
        sock = listen_socket(host, port)
        host, port = _bound(sock)
        settings = settings.model_copy(update={"host": host, "port": port})
        with Memory.open(settings.database_url(), settings=settings) as mem:
            if not mem.keys.list(settings.local_tenant):
                _first_start(mem, settings)
        shown = f"[{host}]" if ":" in host else host
        note(f"memstrata serving {redact(settings.database_url())} on http://{shown}:{port}")
        for line in _serve_urls(host, port, settings):
            note(line)
        configure_logging(json_logs=settings.log_format == "json", level=settings.log_level)
        # memstrata's access log (with request ids) replaces uvicorn's.
        protocol = guarded_protocol(ServeLimits.from_settings(settings))
        options: dict[str, Any] = {
            "host": host,
            "port": port,
            "log_level": settings.log_level.lower(),
            "access_log": False,
            "log_config": None,
            # Header and body deadlines, a connection cap, problem JSON for bad HTTP.
            "http": protocol,
            "timeout_keep_alive": settings.serve_keepalive_s,
        }
        _watch_store(settings)
        if processes == 1:
            config = uvicorn.Config(create_app(settings=settings), **options)
            server = uvicorn.Server(config)
            server.run(sockets=[sock])
            if not server.started:
                raise typer.Exit(1)
            return
        # Each process is started afresh and builds its app from the environment: the
        # database as resolved here (--db included), everything else as this process sees it.
        os.environ["MEMSTRATA_DB"] = settings.database_url()
        os.environ["MEMSTRATA_WORKER"] = settings.worker
        from uvicorn.supervisors import Multiprocess

        config = uvicorn.Config(
            "memstrata.server.app:app_from_environment",
            factory=True,
            workers=processes,
            # A process imports and opens the store before it answers the supervisor's
            # first health check: on a loaded machine that takes longer than uvicorn's 5 s.
            timeout_worker_healthcheck=30,
            **options,
        )
        Multiprocess(config, sockets=[sock]).run()


def listen_socket(host: str, port: int) -> socket.socket:
    """A socket bound to ``host:port`` (as uvicorn binds one). A failure is one
    ConfigurationError naming the address and the ways to choose another."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as exc:
        sock.close()
        why = exc.strerror or str(exc)
        raise ConfigurationError(
            f"cannot listen on {host}:{port}: {why}. Stop what holds port {port}, or choose "
            "another: memstrata serve --port N (or MEMSTRATA_PORT=N; make run PORT=N)"
        ) from None
    sock.set_inheritable(True)
    return sock


def _bound(sock: socket.socket) -> tuple[str, int]:
    name = sock.getsockname()
    return str(name[0]), int(name[1])


def _watch_store(settings: Settings) -> None:
    """On a SQLite file, stop cleanly (one log line naming the file) once the store's files
    cannot be written any more, before sqlite dies of it (see server/storewatch.py)."""
    url = settings.database_url()
    if settings.serve_store_check_s <= 0 or not url.startswith("sqlite:"):
        return
    path = sqlite_path(url)
    if path is not None:
        from memstrata.server.storewatch import StoreWatch

        StoreWatch(path, settings.serve_store_check_s).start()


def _first_start(mem: Memory, settings: Settings) -> None:
    """No key yet. The embedded SQLite store is one person's: print a key for its local
    user. A PostgreSQL store is shared and its log is read by others: print how to make
    a key instead of a working one."""
    url = settings.database_url()
    if url.split(":", 1)[0].lower() != "sqlite":
        shown = redact(url)
        hidden = " (with the password in place of ***)" if shown != url else ""
        typer.echo(
            f"\nNo API key exists yet. Create one (shown only once) with{hidden}:\n\n"
            f"    memstrata keys create --db {shlex.quote(shown)} "
            f"--tenant {settings.local_tenant} --user {settings.local_user}\n"
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
