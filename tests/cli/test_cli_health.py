"""``memstrata health`` and ``memstrata consolidate`` (typer's CliRunner, in process, on a
SQLite file): the report as a table and as JSON, a dry run, --apply and --revert."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest

from memstrata import Memory, Scope
from memstrata.config import Settings
from memstrata.testing import override

LOCAL = Scope("local", "local")


@pytest.fixture
def mem(tmp_path: Path, db: str) -> Iterator[Memory]:
    memory = Memory.open(db, settings=Settings(home=tmp_path, worker="off"))
    with override(memory, facts_embedder=None):
        yield memory
    memory.close()


def test_health_and_consolidate(run, mem) -> None:
    keep = mem.facts.add(LOCAL, "User prefers dark roast coffee").id
    dup = mem.facts.add(LOCAL, "user prefers dark-roast coffee!").id
    mem.facts.add(Scope("local", "other"), "User prefers dark roast coffee")

    table = run("health").stdout
    assert "near duplicates" in table
    assert dup in table
    report = json.loads(run("health", "--json", "--stale-days", "1").stdout)
    assert report["duplicates"]["count"] == 1
    assert report["stale_days"] == 1
    assert report["usage_known"] is True  # prompt provenance counts the uses
    assert report["sizes"]["active"] == 2

    dry = run("consolidate")
    assert "dry run" in dry.stderr
    assert dup in dry.stdout
    assert mem.facts.get(LOCAL, dup).status.value == "active"

    applied = json.loads(run("consolidate", "--apply", "--json").stdout)
    assert applied["applied"]
    assert applied["changes"][0]["target_id"] == keep
    assert mem.facts.get(LOCAL, dup).status.value == "superseded"

    out = run("consolidate", "--revert", applied["id"])
    assert out.stdout.split() == [dup]
    assert mem.facts.get(LOCAL, dup).status.value == "active"
    assert "not found" in run("consolidate", "--revert", applied["id"], code=1).stderr
    assert "nothing to consolidate" in run("consolidate", "--user", "other").stderr
