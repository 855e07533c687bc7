"""Online backups of the embedded store: a consistent, complete copy taken while it runs."""

from __future__ import annotations

import threading
from pathlib import Path

import pytest
from typer.testing import CliRunner

from memstrata import Memory, Scope
from memstrata.backup import backup_sqlite
from memstrata.cli import app
from memstrata.config import Settings
from memstrata.errors import InvalidInput

S = Scope("acme", "alice")


def _open(path: Path) -> Memory:
    return Memory.open(f"sqlite:///{path}", settings=Settings(home=path.parent, worker="off"))


def _export(mem: Memory) -> str:
    lines: list[str] = []
    mem.transfer.export(lines.append)
    return "\n".join(lines)


def test_a_backup_holds_exactly_the_store(tmp_path: Path) -> None:
    mem = _open(tmp_path / "live.db")
    try:
        c = mem.conversations.create(S, title="t")
        for i in range(50):
            mem.messages.append(
                S, c.id, role="user" if i % 2 == 0 else "assistant", content=f"m{i}"
            )
        mem.facts.add(S, "likes backups")
        seen: list[tuple[int, int]] = []
        size = backup_sqlite(
            tmp_path / "live.db",
            tmp_path / "copy.db",
            pages_per_step=2,
            progress=lambda done, total: seen.append((done, total)),
        )
        assert size > 0
        assert seen[-1][0] == seen[-1][1]
        copy = _open(tmp_path / "copy.db")
        try:
            assert _export(copy) == _export(mem)
        finally:
            copy.close()
        with pytest.raises(InvalidInput, match="never overwrites"):
            backup_sqlite(tmp_path / "live.db", tmp_path / "copy.db")
    finally:
        mem.close()


def test_a_backup_taken_during_writes_is_consistent(tmp_path: Path) -> None:
    mem = _open(tmp_path / "live.db")
    c = mem.conversations.create(S)
    stop = threading.Event()

    def write() -> None:
        i = 0
        while not stop.is_set():
            mem.messages.append(
                S, c.id, role="user" if i % 2 == 0 else "assistant", content=f"w{i}"
            )
            i += 1

    writer = threading.Thread(target=write)
    writer.start()
    try:
        for n in range(3):
            backup_sqlite(tmp_path / "live.db", tmp_path / f"copy{n}.db", pages_per_step=1)
    finally:
        stop.set()
        writer.join(30)
        mem.close()
    for n in range(3):
        copy = _open(tmp_path / f"copy{n}.db")
        try:
            [conv] = copy.conversations.list(S).items
            msgs = copy.messages.list(S, conv.id, limit=500).items
            ids = {m.id for m in msgs}
            # A snapshot: every message's parent is in it, and the count matches the row.
            assert all(m.parent_id is None or m.parent_id in ids for m in msgs)
            assert conv.message_count == len(msgs)
        finally:
            copy.close()


def test_the_cli_backs_up_sqlite_and_points_postgres_to_its_tools(tmp_path: Path) -> None:
    mem = _open(tmp_path / "memstrata.db")
    mem.conversations.create(S)
    mem.close()
    runner = CliRunner()
    env = {"MEMSTRATA_HOME": str(tmp_path), "MEMSTRATA_DB": None}
    out = tmp_path / "b" / "backup.db"
    result = runner.invoke(app, ["backup", "--out", str(out)], env=env)
    assert result.exit_code == 0, result.stderr
    assert "integrity ok" in result.stdout
    assert out.exists()
    result = runner.invoke(
        app,
        ["backup", "--out", str(tmp_path / "x.db"), "--db", "postgresql://localhost/x"],
        env=env,
    )
    assert result.exit_code == 1
    assert "pg_dump" in result.stderr
