"""The ``memstrata`` command line (typer's CliRunner, in process)."""

from __future__ import annotations

import json
import re
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memstrata import Memory
from memstrata.cli import app
from support import store_file, table_rows

KEY = re.compile(r"msk_[0-9a-f]{12}_[A-Za-z0-9_-]{20,}")


@pytest.fixture
def home(tmp_path: Path) -> Path:
    return tmp_path / "home"


@pytest.fixture
def run(home: Path):
    runner = CliRunner()

    def _run(*args: str, code: int = 0):
        result = runner.invoke(
            app, list(args), env={"MEMSTRATA_HOME": str(home), "MEMSTRATA_DB": None}
        )
        assert result.exit_code == code, (result.stdout, result.stderr, result.exception)
        return result

    return _run


def test_keys_create_refuses_a_missing_store_unless_init(run, home, tmp_path):
    # Run where no store is: an error naming the store looked for and the ways out, and
    # nothing created (a key in a store the server does not read would be rejected).
    refused = run("keys", "create", "--tenant", "acme", "--user", "u1", code=1)
    assert refused.stdout == ""
    message = " ".join(refused.stderr.split())
    assert str(home / "memstrata.db") in message
    assert "--db" in message
    assert "--init" in message
    assert not (home / "memstrata.db").exists()
    db = tmp_path / "named.db"
    refused = run("import", str(tmp_path / "x.json"), "--db", f"sqlite:///{db.as_posix()}", code=1)
    assert "no memstrata store" in refused.stderr
    assert not db.exists()
    # A read names the command that makes a store.
    assert "memstrata migrate" in " ".join(run("keys", "list", code=1).stderr.split())


def test_keys_create_prints_only_the_key(run, home):
    result = run("keys", "create", "--tenant", "acme", "--user", "u1", "--label", "ci", "--init")
    assert KEY.fullmatch(result.stdout.rstrip("\n"))
    assert result.stdout.count("\n") == 1
    assert "acme" in result.stderr  # the note goes to stderr
    # The default store lives under MEMSTRATA_HOME, and the key authenticates there.
    assert (home / "memstrata.db").exists()
    with Memory.open(f"sqlite:///{(home / 'memstrata.db').as_posix()}") as mem:
        who = mem.keys.authenticate(result.stdout.strip())
        assert who is not None
        assert (who.tenant, who.user, who.admin) == ("acme", "u1", False)
        assert [u for u, _ in mem.users.list("acme").items] == ["u1"]


def test_keys_create_admin_and_db_option(run, tmp_path):
    db = f"sqlite:///{(tmp_path / 'other.db').as_posix()}"
    result = run("keys", "create", "--tenant", "acme", "--admin", "--db", db, "--init")
    secret = result.stdout.strip()
    assert KEY.fullmatch(secret)
    with Memory.open(db) as mem:
        who = mem.keys.authenticate(secret)
        assert who is not None
        assert who.admin
        assert who.user is None


@pytest.mark.parametrize(
    "args",
    [
        ("keys", "create", "--tenant", "acme"),
        ("keys", "create", "--tenant", "acme", "--user", "u", "--admin"),
        ("keys", "create", "--user", "u"),
        ("keys", "revoke"),
        ("no-such-command",),
    ],
)
def test_usage_errors_exit_2(run, args):
    result = run(*args, code=2)
    assert result.stdout == ""


def test_invalid_names_exit_1_with_one_line(run):
    result = run("keys", "create", "--tenant", "bad tenant", "--user", "u", code=1)
    assert result.stdout == ""
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1
    assert lines[0].startswith("error: ")


def test_keys_list_json_and_revoke(run):
    user_key = run("keys", "create", "--tenant", "acme", "--user", "u1", "--init").stdout.strip()
    admin_key = run("keys", "create", "--tenant", "acme", "--admin").stdout.strip()
    run("keys", "create", "--tenant", "other", "--user", "u2")

    listed = json.loads(run("keys", "list", "--json").stdout)
    assert len(listed) == 3
    acme = json.loads(run("keys", "list", "--tenant", "acme", "--json").stdout)
    assert {(k["tenant"], k["user"], k["admin"]) for k in acme} == {
        ("acme", "u1", False),
        ("acme", None, True),
    }
    for k in acme:
        assert set(k) == {
            "id",
            "tenant",
            "user",
            "admin",
            "label",
            "created_at",
            "revoked_at",
            "expires_at",
        }
        assert k["revoked_at"] is None
    everything = run("keys", "list", "--json").stdout + run("keys", "list").stdout
    # Secrets are never shown, only their ids.
    assert user_key not in everything
    assert admin_key not in everything
    assert user_key.split("_")[2] not in everything

    table = run("keys", "list", "--tenant", "acme").stdout
    for k in acme:
        assert k["id"] in table

    user_id = next(k["id"] for k in acme if not k["admin"])
    assert user_id in run("keys", "revoke", user_id).stdout
    after = {k["id"]: k for k in json.loads(run("keys", "list", "--json").stdout)}
    assert after[user_id]["revoked_at"] is not None
    result = run("keys", "revoke", "nosuchkey", code=1)
    assert result.stderr.startswith("error: ")


def test_migrate_reports_the_schema_version(run, home):
    result = run("migrate")
    assert "schema version:" in result.stdout
    match = re.search(r"schema version: (\d+)", result.stdout)
    assert match is not None
    version = int(match[1])
    with Memory.open(f"sqlite:///{(home / 'memstrata.db').as_posix()}") as mem:
        assert version == mem.core.engine.schema_version()
    assert version >= 1
    again = run("migrate")
    assert f"schema version: {version}" in again.stdout


def test_migrate_hides_a_password_in_the_url(run):
    result = run("migrate", "--db", "postgresql://me:hunter2@localhost/db", code=1)
    assert "hunter2" not in result.stdout + result.stderr


def test_doctor_creates_nothing_and_names_pending_migrations(run, home):
    report = json.loads(run("doctor", "--json").stdout)
    assert report["ok"] is True  # no store yet is a warning
    assert report["database"]["exists"] is False
    assert "memstrata migrate" in report["database"]["warnings"][0]
    assert report["longterm"]["skipped"]
    assert not (home / "memstrata.db").exists()
    # A store two migrations behind: doctor names them and leaves them pending.
    run("migrate")
    with store_file(home / "memstrata.db") as conn:
        applied = [v for (v,) in conn.execute("SELECT version FROM schema_migrations ORDER BY 1")]
        conn.execute("DELETE FROM schema_migrations WHERE version >= ?", (applied[-2],))
    report = json.loads(run("doctor", "--json").stdout)
    assert report["database"]["pending_migrations"] == applied[-2:]
    assert "2 migration(s) pending" in run("doctor").stdout.replace("\n", " ")
    with store_file(home / "memstrata.db") as conn:
        left = conn.execute("SELECT max(version) FROM schema_migrations").get
        assert left == applied[-3]  # nothing was applied


def test_doctor_reports_ok(run, home):
    run("migrate")
    with store_file(home / "memstrata.db") as conn:
        before = table_rows(conn)
    result = run("doctor", "--json")
    with store_file(home / "memstrata.db") as conn:
        assert table_rows(conn) == before  # read only
    report = json.loads(result.stdout)
    assert report["ok"] is True
    assert report["memstrata"]
    assert report["python"].count(".") == 2
    assert report["sqlite"]
    assert report["database"]["ok"] is True
    assert report["database"]["schema_version"] >= 1
    assert report["tokenizer"]["ok"] is True
    assert report["tokenizer"]["offline"] is True
    counts = report["tokenizer"]["counts"]
    assert set(counts) == {"o200k_base", "cl100k_base"}
    assert all(n > 0 for n in counts.values())
    assert counts["o200k_base"] != counts["cl100k_base"]  # two real encodings, not one estimate
    embedder = report["embedder"]
    assert embedder["ok"] is True
    assert embedder["kind"] == "default"
    assert embedder["offline"] is True
    assert embedder["identity"].startswith("all-minilm-l6-v2@")
    assert embedder["dim"] == 384
    assert abs(embedder["sample_norm"] - 1.0) < 1e-3
    table = run("doctor").stdout
    assert "tokenizer" in table
    assert "database" in table


def test_doctor_fails_on_a_broken_database(run, tmp_path):
    blocker = tmp_path / "file"
    blocker.write_text("not a directory")
    db = f"sqlite:///{(blocker / 'x.db').as_posix()}"
    result = run("doctor", "--json", "--db", db, code=1)
    report = json.loads(result.stdout)
    assert report["ok"] is False
    assert report["database"]["ok"] is False
    assert report["database"]["error"]


def test_bench_dispatches_to_run_bench(run, monkeypatch, tmp_path):
    import memstrata.bench

    calls = []
    encryptions = []

    def fake_run_bench(
        name, *, out, db, sizes, data, runs, time_limit, processes, settle, encryption
    ):
        calls.append((name, out, db, sizes, data, runs, time_limit, processes, settle))
        encryptions.append(encryption)
        return {"name": name}

    monkeypatch.setattr(memstrata.bench, "run_bench", fake_run_bench)
    out = tmp_path / "r.json"
    run("bench", "history", "--out", str(out), "--sizes", "10,20", "--sizes", "30")
    run("bench", "history")
    data = tmp_path / "d.json"
    run("bench", "peers", "--data", str(data), "--runs", "5", "--time-limit", "60")
    run("bench", "load", "--processes", "2")
    run("bench", "recall-natural", "--data", str(data), "--settle", "1.5")
    run("bench", "history", "--encryption", "both")
    assert encryptions == ["off", "off", "off", "off", "off", "both"]
    calls.pop()
    assert calls == [
        ("history", out, None, [10, 20, 30], None, None, None, None, None),
        ("history", None, None, None, None, None, None, None, None),
        ("peers", None, None, None, data, 5, 60.0, None, None),
        ("load", None, None, None, None, None, None, 2, None),
        ("recall-natural", None, None, None, data, None, None, None, 1.5),
    ]
    run("bench", "recall-natural", "--settle", "-1", code=2)
    run("bench", "peers", "--runs", "0", code=2)
    run("bench", "history", "--sizes", "ten", code=2)


def test_bench_unknown_name_exits_1(run):
    result = run("bench", "no-such-benchmark", code=1)
    assert result.stderr.startswith("error: ")


def test_worker_once_runs_what_is_due_and_exits(tmp_path: Path) -> None:
    result = CliRunner().invoke(app, ["worker", "--once", "--db", f"sqlite:///{tmp_path / 'w.db'}"])
    assert result.exit_code == 0, result.output
    assert "ran 0 job(s)" in result.output


def test_keys_rotate_and_expiry(run):
    old = run("keys", "create", "--tenant", "acme", "--user", "u1", "--label", "ci", "--init")
    old = old.stdout.strip()
    [key] = json.loads(run("keys", "list", "--json").stdout)
    new = run("keys", "rotate", key["id"], "--expires-in", "30d").stdout.strip()
    assert new.startswith("msk_")
    assert new != old
    listed = {k["id"]: k for k in json.loads(run("keys", "list", "--json").stdout)}
    assert listed[key["id"]]["revoked_at"] is not None
    [fresh] = [k for k in listed.values() if k["revoked_at"] is None]
    assert fresh["label"] == "ci"
    assert fresh["expires_at"] is not None
    assert run("keys", "rotate", key["id"], code=1).stderr.startswith("error: ")
    assert run("keys", "create", "--tenant", "a", "--admin", "--expires-in", "soon", code=2)
