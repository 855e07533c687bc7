"""Tables fit an 80-column terminal: ids whole, text readable, what is left out named."""

from __future__ import annotations

from typer.testing import CliRunner

from memstrata import Memory, Scope
from memstrata.cli import app
from memstrata.config import Settings


def test_tables_fit_80_columns_with_ids_whole(db, cli_env, tmp_path):
    scope = Scope("local", "local")
    text = "a long message that runs past the end of an eighty column terminal " * 2
    with Memory.open(db, settings=Settings(home=tmp_path / "home", worker="off")) as mem:
        cid = mem.conversations.create(scope, title="a title").id
        first = mem.messages.append(scope, cid, role="user", content=text)
        second = mem.messages.append(scope, cid, role="assistant", content="short reply")
    env = {**cli_env, "COLUMNS": "80"}
    runner = CliRunner()
    for args in (
        ("messages", "list", cid),
        ("conversations", "show", cid),
        ("conversations", "list"),
    ):
        out = runner.invoke(app, [*args, "--db", db], env=env)
        assert out.exit_code == 0, out.output
        lines = out.stdout.splitlines()
        assert max(len(line) for line in lines) <= 80, out.stdout
        if args[0] == "messages":
            assert first.id in out.stdout  # whole, on one line
            assert second.id in out.stdout
            assert "runs past the end" in " ".join(out.stdout.split())
            assert "left out to fit: parent" in out.stdout
    wide = runner.invoke(app, ["messages", "list", cid, "--db", db], env=cli_env)
    assert "left out" not in wide.stdout  # at 250 columns everything fits
