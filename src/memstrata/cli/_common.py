"""What every command of the ``memstrata`` command line shares: the options spelled alike
everywhere, the settings a ``--db`` names, opening the store, the scope of a command, and
how errors and notes are printed.

Errors print one line on stderr and exit 1 (2 for a wrong command line); notes for people
go to stderr too, so stdout carries only what a script captures.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Annotated, NoReturn

import typer

from memstrata.api import Memory
from memstrata.backends.registry import sqlite_path
from memstrata.config import Settings
from memstrata.errors import ConfigurationError, MemstrataError
from memstrata.types import Scope

__all__ = [
    "STDIN",
    "Agent",
    "ConversationId",
    "Db",
    "Init",
    "JsonFlag",
    "MaxTokens",
    "PageCursor",
    "PageLimit",
    "Tenant",
    "User",
    "db_problem",
    "dump",
    "duration",
    "errors",
    "fail",
    "missing_store",
    "named_scope",
    "note",
    "open_memory",
    "read_text",
    "session",
    "settings_for",
]

# -- options ---------------------------------------------------------------------------------

Db = Annotated[
    str | None,
    typer.Option(
        "--db",
        help="Database URL (default: SQLite under MEMSTRATA_HOME, ./.memstrata).",
        show_default=False,
    ),
]
Init = Annotated[
    bool,
    typer.Option(
        "--init", help="Create the store when there is none yet (else: an error naming it)."
    ),
]
JsonFlag = Annotated[bool, typer.Option("--json", help="Print JSON for scripts.")]
PageLimit = Annotated[int, typer.Option("--limit", help="Items per page.", min=1)]
PageCursor = Annotated[
    str | None,
    typer.Option("--cursor", help="Next page (printed after a full page).", show_default=False),
]
Tenant = Annotated[
    str | None,
    typer.Option("--tenant", help="Tenant (default: the local tenant).", show_default=False),
]
User = Annotated[
    str | None,
    typer.Option("--user", help="User (default: the local user).", show_default=False),
]
Agent = Annotated[
    str | None,
    typer.Option("--agent", help="The agent's own memory of the user.", show_default=False),
]
ConversationId = Annotated[str, typer.Argument(help="The conversation id.")]
MaxTokens = Annotated[int, typer.Option("--max-tokens", help="Token budget.", min=0)]

STDIN = "-"  # a text argument of "-" is read from stdin, so long or piped text fits


def read_text(value: str) -> str:
    """The text of an argument: stdin for ``-``, else the argument itself."""
    return sys.stdin.read() if value == STDIN else value


_UNITS = {"s": 1, "m": 60, "h": 3600, "d": 86400, "w": 604800}


def duration(text: str) -> float:
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


# -- output and errors -----------------------------------------------------------------------


def note(message: str) -> None:
    """A line for people on stderr, so stdout stays clean for scripts."""
    typer.echo(message, err=True)


def dump(value: object) -> None:
    """JSON for scripts on stdout, text kept as it is (not escaped to ASCII)."""
    typer.echo(json.dumps(value, indent=2, ensure_ascii=False))


def fail(message: str) -> NoReturn:
    note(f"error: {' '.join(message.split())}")
    raise typer.Exit(1)


@contextmanager
def errors() -> Iterator[None]:
    """A memstrata error becomes one line on stderr and exit status 1."""
    try:
        yield
    except MemstrataError as exc:
        fail(exc.message)
    except OSError as exc:  # e.g. a database path that cannot be created
        fail(str(exc))


# -- settings, the store and the scope -------------------------------------------------------

_SCHEMES = ("sqlite", "postgresql", "postgres")


def db_problem(db: str) -> str | None:
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


def settings_for(db: str | None) -> Settings:
    """The settings from the environment, with the database of ``--db`` when given."""
    problem = db_problem(db) if db else None
    if problem:
        fail(problem)
    settings = Settings()
    return settings.model_copy(update={"db": db or settings.database_url()})


def missing_store(url: str) -> Path | None:
    """The SQLite file ``url`` names when it does not exist yet (else None: a memory
    store, an existing file, or PostgreSQL, whose database is made by its operator)."""
    if url.split(":", 1)[0].lower() != "sqlite":
        return None
    path = sqlite_path(url)
    return path if path is not None and not path.exists() else None


def open_memory(db: str | None, *, init: bool | None = None) -> Memory:
    """The store, for a short-lived command: it queues background work and leaves it to
    ``memstrata serve`` or ``memstrata worker`` (no worker thread that exits with it).

    A command never makes a new store by accident (a key written to a store the server
    does not read is a key it rejects): a missing SQLite store is an error unless
    ``init`` (``--init``); ``init=None`` is for commands that have no ``--init``."""
    settings = settings_for(db).model_copy(update={"worker": "off"})
    missing = missing_store(settings.database_url())
    if missing is not None and not init:
        how = "add --init to create it" if init is False else "memstrata migrate creates it"
        fail(
            f"no memstrata store at {missing}. Name the server's store with --db (or "
            f"MEMSTRATA_DB / MEMSTRATA_HOME as the server has them), or {how}"
        )
    return Memory.open(settings.database_url(), settings=settings)


def named_scope(
    settings: Settings, tenant: str | None, user: str | None, agent: str | None
) -> Scope:
    """The scope named on the command line; the local tenant and user stand in for omissions."""
    return Scope(tenant or settings.local_tenant, user or settings.local_user, agent)


@contextmanager
def session(
    db: str | None,
    tenant: str | None,
    user: str | None,
    agent: str | None,
    *,
    init: bool | None = None,
) -> Iterator[tuple[Memory, Scope]]:
    """The store opened for one command, and the scope it acts in (closed on the way out)."""
    scope = named_scope(settings_for(db), tenant, user, agent)
    with open_memory(db, init=init) as mem:
        yield mem, scope
