"""``memstrata search``: relevance per hit, --explain's signals, --explain-id verdicts."""

from __future__ import annotations

import json
from pathlib import Path

from typer.testing import CliRunner

from memstrata import Memory, Scope
from memstrata.cli import app
from memstrata.config import Settings


def test_search_explains_itself(tmp_path: Path) -> None:
    home = tmp_path / "home"
    home.mkdir()
    db = f"sqlite:///{(home / 'memstrata.db').as_posix()}"
    scope = Scope("local", "local")
    with Memory.open(db, settings=Settings(home=home, worker="off", embedder="none")) as mem:
        conv = mem.conversations.create(scope)
        msg = mem.messages.append(scope, conv.id, role="user", content="the lighthouse keeper")
    env = {"MEMSTRATA_HOME": str(home), "MEMSTRATA_DB": db, "MEMSTRATA_EMBEDDER": "none"}
    runner = CliRunner()
    args = ["search", "lighthouse", "--explain", "--explain-id", msg.id, "--explain-id", "nope"]
    result = runner.invoke(app, [*args, "--json"], env=env)
    assert result.exit_code == 0, result.output
    body = json.loads(result.stdout)
    (hit,) = body["hits"]
    assert 0 < hit["relevance"] <= 1
    assert hit["signals"]["cosine"] is None  # keywords only: no vector
    assert {e["id"]: e["reason"] for e in body["explained"]} == {
        msg.id: "returned",
        "nope": "unknown",
    }
    text = runner.invoke(app, args, env={**env, "COLUMNS": "80"})
    assert text.exit_code == 0, text.output
    assert "relevance" in text.stdout
    assert "nope: unknown" in text.stdout
    picky = runner.invoke(app, ["search", "lighthouse", "--min-relevance", "1", "--json"], env=env)
    assert json.loads(picky.stdout)["hits"] == []
    bad = runner.invoke(app, ["search", "lighthouse", "--min-relevance", "2"], env=env)
    assert bad.exit_code != 0
