"""``memstrata gc --node-memory --older-than``: counts, dry run, deletion."""

from __future__ import annotations

import json

from typer.testing import CliRunner

from memstrata import Memory, Scope
from memstrata.cli import app
from memstrata.nodes.service import blobs_for

S = Scope("t1", "alice")


def test_gc_deletes_node_memories_older_than_the_cutoff(tmp_path, monkeypatch):
    monkeypatch.setenv("MEMSTRATA_HOME", str(tmp_path))
    monkeypatch.setenv("MEMSTRATA_WORKER", "off")
    db = f"sqlite:///{(tmp_path / 'gc.db').as_posix()}"
    blobs = f"file://{(tmp_path / 'blobs').as_posix()}"
    mem = Memory.open(db, blobs=blobs)
    cid = mem.conversations.create(S).id
    for node in ("a", "b"):
        mem.nodes.add_turn(S, "app", cid, node, message_id="m1", user_content="x")
    mem.close()
    runner = CliRunner()

    r = runner.invoke(
        app, ["gc", "--node-memory", "--older-than", "30d", "--db", db, "--blobs", blobs, "--json"]
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["node_memories"] == 0

    r = runner.invoke(
        app,
        ["gc", "--node-memory", "--older-than", "0s", "--dry-run", "--db", db, "--blobs", blobs],
    )
    assert r.exit_code == 0, r.output
    assert "would delete 2 node memories (2 objects" in r.stdout

    r = runner.invoke(
        app, ["gc", "--node-memory", "--older-than", "0", "--db", db, "--blobs", blobs, "--json"]
    )
    assert r.exit_code == 0, r.output
    assert json.loads(r.stdout)["objects"] == 2

    mem = Memory.open(db, blobs=blobs)
    try:
        assert blobs_for(mem.core).store.list_prefix("node_memory/") == []
        assert mem.nodes.history(S, "app", cid, "a").messages == []
    finally:
        mem.close()

    r = runner.invoke(app, ["gc", "--node-memory", "--older-than", "soon", "--db", db])
    assert r.exit_code != 0
    r = runner.invoke(app, ["gc", "--db", db])
    assert r.exit_code != 0
