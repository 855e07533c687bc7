"""``memstrata usage`` and ``memstrata budgets``, and budget-blocked jobs in ``jobs list`` and
``doctor`` (typer's CliRunner, in process, on a SQLite file, with the demo model)."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

from memstrata import Memory, Scope
from memstrata.config import Settings
from memstrata.storage.plan import write
from memstrata.usage.store import UsageRow, insert_rows

ALICE = Scope("acme", "alice")


@pytest.fixture
def cli_env(cli_env: dict[str, str | None]) -> dict[str, str | None]:
    # A model is configured: a queued extraction could run here, but for its budget.
    return {**cli_env, "MEMSTRATA_LLM_BASE_URL": "fake://", "MEMSTRATA_LLM_MODEL": "demo"}


@pytest.fixture
def mem(tmp_path: Path, db: str) -> Iterator[Memory]:
    memory = Memory.open(db, settings=Settings(home=tmp_path, worker="off"))
    yield memory
    memory.close()


def _spend(mem: Memory, tenant: str, user: str, purpose: str, tokens: int) -> None:
    row = UsageRow(
        tenant, user, "", purpose, "m", "llm", 1, 0, tokens, 1, 2000, mem.core.rt.clock()
    )
    mem.core.engine.run(write(lambda: insert_rows([row], [mem.core.rt.make_id()])))


def test_usage_reports_per_purpose_and_per_user(run: Any, mem: Memory) -> None:
    _spend(mem, "acme", "alice", "extraction", 100)
    _spend(mem, "acme", "bob", "compaction", 10)
    _spend(mem, "zeta", "carol", "extraction", 1)
    report = json.loads(run("usage", "--tenant", "acme", "--json").stdout)
    assert [(i["key"], i["tokens"]) for i in report["items"]] == [
        ("compaction", 11),
        ("extraction", 101),
    ]
    report = json.loads(run("usage", "--tenant", "acme", "--group-by", "user", "--json").stdout)
    assert [i["key"] for i in report["items"]] == ["alice", "bob"]
    report = json.loads(run("usage", "--tenant", "acme", "--user", "bob", "--json").stdout)
    assert report["total"]["tokens"] == 11
    everyone = json.loads(run("usage", "--json").stdout)  # every tenant
    assert everyone["total"]["tokens"] == 114
    table = run("usage", "--tenant", "acme").stdout
    assert "extraction" in table
    assert "(total)" in table
    run("usage", "--from", "yesterday", code=1)
    run("usage", "--group-by", "model", code=1)


def test_budgets_block_extraction_visibly_until_raised(run: Any, mem: Memory) -> None:
    out = run("budgets", "set", "--tenant", "acme", "--purpose", "extraction", "--tokens", "0")
    assert "used up" in out.stdout
    cid = mem.conversations.create(ALICE).id
    mem.messages.append(ALICE, cid, role="user", content="I like green tea.")
    job = mem.longterm.observe(ALICE, cid)
    [item] = json.loads(run("jobs", "list", "--json").stdout)["items"]
    assert (item["id"], item["status"], item["blocked"]) == (job.id, "queued", "budget")
    assert "budget" in run("jobs", "list").stdout
    listed = json.loads(run("budgets", "list", "--json").stdout)["items"]
    assert [(b["tenant"], b["purpose"], b["exhausted"]) for b in listed] == [
        ("acme", "extraction", True)
    ]
    report = json.loads(run("doctor", "--json").stdout)
    [held] = report["budgets"]["used_up"]
    assert (held["tenant"], held["purpose"], held["waiting_jobs"]) == ("acme", "extraction", 1)
    assert any("blocked: budget" in w for w in report["budgets"]["warnings"])
    row = next(x for x in run("doctor").stdout.splitlines() if x.strip().startswith("budgets"))
    assert "warning" in row

    run("budgets", "set", "--tenant", "acme", "--purpose", "extraction", "--tokens", "100000")
    [item] = json.loads(run("jobs", "list", "--json").stdout)["items"]
    assert item["blocked"] is None
    assert json.loads(run("doctor", "--json").stdout)["budgets"]["used_up"] == []
    run("budgets", "clear", "--tenant", "acme", "--purpose", "extraction")
    run("budgets", "clear", "--tenant", "acme", "--purpose", "extraction", code=1)
    run("budgets", "set", "--tenant", "acme", "--purpose", "bad purpose", "--tokens", "1", code=1)
