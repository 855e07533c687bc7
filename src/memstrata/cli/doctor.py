"""``memstrata migrate`` and ``memstrata doctor``: the schema in place, and a check of the
installation (versions, database, offline tokenizer, embedder, long-term extraction,
workers) as a table for people or JSON for scripts.

Doctor fails (exit 1) only on what does not work; what works in a lesser way (recall on
keywords alone, extraction without an LLM, due jobs with no worker) is a warning.
"""

from __future__ import annotations

import json
import platform
from collections.abc import Callable
from pathlib import Path
from typing import Any

import apsw
import typer
from rich.console import Console

from memstrata.api import Memory
from memstrata.backends.registry import applied_migrations, redact
from memstrata.cli._common import Db, JsonFlag, db_problem, errors, open_memory, settings_for
from memstrata.cli.tables import new_table
from memstrata.errors import MemstrataError, MissingDependency
from memstrata.keyring import describe, keyring_dir, open_sealer
from memstrata.sealing import PREFIX
from memstrata.storage.plan import Op, Query
from memstrata.transfer.seal import clear_values

__all__ = ["doctor", "migrate"]

TOKENIZER_SAMPLE = "memstrata counts tokens offline: héllo wörld, 你好, 12345 🚀"


def _migrations(dialect: str) -> list[tuple[int, str]]:
    from memstrata.storage.schema import MIGRATIONS  # facade gap: the known migrations

    return [(m.version, m.name) for m in MIGRATIONS.get(dialect, ())]


def _latest_schema(dialect: str) -> int:
    return max((v for v, _ in _migrations(dialect)), default=0)


def migrate(db: Db = None) -> None:
    """Apply pending schema migrations and print the versions in place."""
    settings = settings_for(db)
    with errors(), open_memory(db, init=True) as mem:  # creating the store is its job
        # Opening the store applies pending migrations; this call picks up any that
        # another process added meanwhile, and reports the result.
        mem.admin.migrate()
        version = mem.admin.schema_version()
        known = _migrations(mem.admin.dialect)
    typer.echo(f"database: {redact(settings.database_url())}")
    for number, name in known:
        if number <= version:
            typer.echo(f"  applied {number}: {name}")
    typer.echo(f"schema version: {version}")


def _probe(db: str | None, info: dict[str, Any], read: Callable[[Memory], dict[str, Any]]) -> bool:
    """Open the memory and add what ``read`` finds to ``info``; False (and ``info["error"]``)
    when it cannot be opened or read."""
    try:
        with open_memory(db) as mem:
            info.update(read(mem))
    except MemstrataError as exc:
        info["error"] = exc.message
        return False
    except OSError as exc:
        info["error"] = str(exc)
        return False
    return True


def _schema_info(mem: Memory) -> dict[str, Any]:
    dialect = mem.admin.dialect
    return {
        "dialect": dialect,
        "schema_version": mem.admin.schema_version(),
        "latest_schema_version": _latest_schema(dialect),
    }


def _check_database(db: str | None) -> dict[str, Any]:
    """The store as it is, read only: doctor creates nothing and migrates nothing. A store
    not made yet, or one with migrations pending, is a warning that names the command."""
    url = settings_for(db).database_url()
    info: dict[str, Any] = {"url": redact(url), "ok": False, "warnings": []}
    try:
        applied = applied_migrations(url)
    except MemstrataError as exc:
        info["error"] = exc.message
        return info
    except Exception as exc:  # a driver's error: what doctor must report
        info["error"] = " ".join(str(exc).split()) or type(exc).__name__
        return info
    dialect = "sqlite" if url.split(":", 1)[0].lower() == "sqlite" else "postgres"
    known = _migrations(dialect)
    info["latest_schema_version"] = _latest_schema(dialect)
    info["ok"] = True
    if applied is None:
        info["exists"] = False
        info["schema_version"] = 0
        info["pending_migrations"] = [number for number, _ in known]
        info["warnings"].append(
            "no store here yet: memstrata serve (or memstrata migrate) makes it"
        )
        return info
    info["exists"] = True
    info["schema_version"] = max(applied, default=0)
    info["pending_migrations"] = [number for number, _ in known if number not in applied]
    if info["schema_version"] > info["latest_schema_version"]:
        info["ok"] = False
        info["error"] = "the database was written by a newer memstrata"
    elif info["pending_migrations"]:
        names = ", ".join(f"{n} {name}" for n, name in known if n in info["pending_migrations"])
        info["warnings"].append(
            f"{len(info['pending_migrations'])} migration(s) pending ({names}): "
            "memstrata migrate applies them (memstrata serve does too)"
        )
    return info


def _ready(database: dict[str, Any]) -> str | None:
    """Why the checks that open the store are skipped (opening would create or migrate
    it), or None when they can run."""
    if not database["ok"]:
        return f"not checked: {database.get('error', 'database failed')}"
    if not database["exists"]:
        return "not checked: no store yet"
    if database["pending_migrations"]:
        return "not checked: migrations pending"
    return None


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


def _check_longterm(db: str | None) -> dict[str, Any]:
    """Doctor's long-term entry. Extraction that cannot run here (no LLM) or dead
    extraction jobs are warnings, not failures: nothing is lost, jobs wait."""
    info: dict[str, Any] = {"ok": False}
    if not _probe(db, info, lambda mem: mem.longterm.status()):
        return info
    info["ok"] = True
    warnings = []
    if info["reason"]:
        warnings.append(f"extraction disabled: {info['reason']}")
    dead = info["jobs"].get("dead", 0)
    if dead:
        warnings.append(f"{dead} dead extraction job(s): see memstrata jobs list --status dead")
    info["warnings"] = warnings
    return info


def _longterm_row(info: dict[str, Any]) -> tuple[str, str, str]:
    """(check, status, detail) of doctor's table."""
    if not info["ok"]:
        return "long-term", "FAILED", info.get("error", "")
    jobs = ", ".join(f"{k} {v}" for k, v in info["jobs"].items())
    extraction = f"extraction {info['extraction']}"
    if info["reason"]:
        extraction += f" ({info['reason']})"
    detail = f"{extraction}; capture {'on' if info['capture'] else 'off'}; jobs: {jobs}"
    dead = info["jobs"].get("dead", 0)
    if dead:
        detail += f"; {dead} dead: see memstrata jobs list --status dead"
    return "long-term", "warning" if info["warnings"] else "ok", detail


def _check_workers(db: str | None) -> dict[str, Any]:
    """Due jobs with no worker seen lately: a warning (they wait, nothing is lost)."""
    info: dict[str, Any] = {"ok": False}
    if not _probe(db, info, lambda mem: mem.jobs.presence().to_dict()):
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


def _budgets(mem: Memory) -> dict[str, Any]:
    held = [
        {
            "tenant": b.tenant,
            "purpose": b.purpose,
            "daily_tokens": b.daily_tokens,
            "used_today": b.used_today,
            "waiting_jobs": n,
        }
        for b, n in mem.usage.held_back()
    ]
    return {"used_up": held}


def _check_budgets(db: str | None) -> dict[str, Any]:
    """Budgets used up today: a warning naming the jobs they hold back (they wait, resume
    the next UTC day or when raised)."""
    info: dict[str, Any] = {"ok": False}
    if not _probe(db, info, _budgets):
        return info
    info["ok"] = True
    info["warnings"] = [
        f"{h['tenant']}: {h['purpose']} budget used up today ({h['used_today']}/"
        f"{h['daily_tokens']} tokens); {h['waiting_jobs']} job(s) wait as blocked: budget"
        for h in info["used_up"]
    ]
    return info


def _budget_rows(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    info = report["budgets"]
    if not info["ok"]:
        return [("budgets", "FAILED", info.get("error", ""))]
    if info["warnings"]:
        return [("budgets", "warning", "; ".join(info["warnings"]))]
    return [("budgets", "ok", "no budget used up today")]


_CLEAR = "(length({0}) > 0 AND substr({0}, 1, 5) <> ?)"


def _sealed_counts(encrypted: bool) -> Op[dict[str, int]]:
    rows = yield Query(
        "SELECT count(*), coalesce(sum(CASE WHEN substr(content, 1, 5) = ? THEN 1 ELSE 0 END), 0) "
        "FROM messages WHERE content <> ''",
        (PREFIX,),
    )
    total, sealed = (int(v) for v in rows[0])
    # Metadata counts with its message: a message in clear in any sealed column is plain.
    plain = yield Query(
        f"SELECT count(*) FROM messages WHERE {_CLEAR.format('content')} "
        f"OR {_CLEAR.format('metadata')}",
        (PREFIX, PREFIX),
    )
    # Every sealed column is scanned: only worth it when encryption is on.
    others = (yield from clear_values()) if encrypted else {}
    return {
        "messages": total,
        "sealed_messages": sealed,
        "plain_messages": int(plain[0][0]),
        "plain_values": sum(others.values()),
    }


def _check_encryption(db: str | None, skipped: str | None) -> dict[str, Any]:
    """Encryption at rest: off, or on with a keyring the master key opens; and how many
    stored messages are sealed. Plain rows in an encrypted store are a warning (written
    before encryption was turned on)."""
    settings = settings_for(db)
    info: dict[str, Any] = {"ok": True, "enabled": settings.encrypt_at_rest, "warnings": []}
    if settings.encrypt_at_rest:
        info["keyring"] = describe(keyring_dir(settings))
        try:
            open_sealer(settings)
        except MemstrataError as exc:
            return {**info, "ok": False, "error": exc.message}
    if skipped:
        return info
    if not _probe(db, info, lambda mem: mem.admin.read(_sealed_counts, settings.encrypt_at_rest)):
        return info
    if settings.encrypt_at_rest and info["plain_messages"]:
        info["warnings"].append(
            f"{info['plain_messages']} message(s) stored before encryption was on are in clear"
        )
    if settings.encrypt_at_rest and info["plain_values"]:
        info["warnings"].append(
            f"{info['plain_values']} other value(s) (titles, metadata, profile, agent state, "
            "logs, graph items) stored before encryption was on are in clear: "
            "run memstrata encrypt --all"
        )
    elif not settings.encrypt_at_rest and info["sealed_messages"]:
        info["ok"] = False
        info["error"] = (
            f"{info['sealed_messages']} sealed message(s) but MEMSTRATA_ENCRYPT_AT_REST is off"
        )
    return info


def _encryption_row(info: dict[str, Any]) -> tuple[str, str, str]:
    if not info["ok"]:
        return "encryption", "FAILED", info.get("error", "")
    detail = "at rest: " + ("on, keyring " + info["keyring"] if info["enabled"] else "off")
    if "messages" in info:
        detail += f"; {info['sealed_messages']} of {info['messages']} message(s) sealed"
    status = "warning" if info["warnings"] else "ok"
    return "encryption", status, "; ".join([detail, *info["warnings"]])


def _diagnose(db: str | None) -> dict[str, Any]:
    from memstrata import __version__

    problem = db_problem(db) if db else None
    unopened = {"ok": False, "error": f"database not opened: {problem}"}
    # A bad --db is reported, and nothing is opened (or created) for it.
    database = (
        {"url": redact(db), "ok": False, "error": problem}
        if db and problem
        else _check_database(db)
    )
    skipped = None if problem else _ready(database)
    unchecked: dict[str, Any] = {"ok": True, "skipped": skipped, "warnings": []}
    report: dict[str, Any] = {
        "python": platform.python_version(),
        "memstrata": __version__,
        "sqlite": apsw.sqlite_lib_version(),
        "database": database,
        "tokenizer": _check_tokenizer(),
        "embedder": _check_embedder(),
        "longterm": dict(unopened)
        if problem
        else dict(unchecked)
        if skipped
        else _check_longterm(db),
        "workers": dict(unopened)
        if problem
        else dict(unchecked)
        if skipped
        else _check_workers(db),
        "budgets": dict(unopened)
        if problem
        else dict(unchecked)
        if skipped
        else _check_budgets(db),
        "encryption": dict(unopened) if problem else _check_encryption(db, skipped),
    }
    report["ok"] = all(
        part["ok"] for part in report.values() if isinstance(part, dict) and "ok" in part
    )
    return report


def _store_rows(report: dict[str, Any]) -> list[tuple[str, str, str]]:
    """The rows of the checks that read the store ("skipped" when it was not opened)."""
    skipped = [
        (name, "skipped", report[key]["skipped"])
        for name, key in (("long-term", "longterm"), ("workers", "workers"), ("budgets", "budgets"))
        if report[key].get("skipped")
    ]
    if skipped:
        return skipped
    return [_longterm_row(report["longterm"]), *_worker_rows(report), *_budget_rows(report)]


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
    if database.get("error"):
        detail += f": {database['error']}"
    warned = database.get("warnings")
    if warned:
        detail += "; " + "; ".join(warned)
    status = "FAILED" if not database["ok"] else "warning" if warned else "ok"
    table.add_row("database", status, detail)
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
    for row in _store_rows(report):
        table.add_row(*row)
    table.add_row(*_encryption_row(report["encryption"]))
    # Details hold paths, URLs and install commands ("memstrata[embed]"): text, never markup.
    Console(highlight=False).print(table)


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
