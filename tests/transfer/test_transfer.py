"""Native export/import: full fidelity, byte-identical round trips across backends,
idempotent imports, one user's export, and a table list that follows the schema."""

from __future__ import annotations

from functools import partial
from pathlib import Path

import pytest

from longterm_support import rule_extractor
from memstrata import Memory, Scope
from memstrata.config import Settings
from memstrata.errors import InvalidInput
from memstrata.storage.plan import Op, Query, read
from memstrata.testing import FakeLLM
from memstrata.testing.conformance import fresh_scope
from memstrata.transfer.tables import DERIVED, TABLES
from support import Models


def _fill(models: Models, mem: Memory, s: Scope, word: str) -> str:
    models(mem, facts_llm=FakeLLM(rule_extractor), facts_embedder=None)
    c = mem.conversations.create(s, title=f"talk {word}", metadata={"k": word})
    q = mem.messages.append(s, c.id, role="user", content=f"I like {word}. Ünïcode ✓")
    a = mem.messages.append(s, c.id, role="assistant", content="ok")
    mem.messages.append(s, c.id, role="assistant", content="fine", parent_id=q.id)  # regenerate
    mem.messages.append(
        s,
        c.id,
        role="assistant",
        content="",
        parent_id=a.id,
        tool_calls=[{"id": "t1", "function": {"name": "f", "arguments": "{}"}}],
        files=[{"type": "image", "transfer_method": "remote_url", "url": "https://x/y.png"}],
    )
    mem.messages.append(s, c.id, role="tool", content="42", tool_call_id="t1")
    mem.longterm.flush(s, c.id)
    mem.messages.append(s, c.id, role="user", content=f"I no longer like {word}")
    mem.messages.append(s, c.id, role="assistant", content="noted")
    mem.longterm.flush(s, c.id)
    mem.facts.add(s, f"manual {word}", category="goal", confidence=0.75)
    mem.working.put(s, f"# notes\n{word}")
    mem.working.put(s, {"topic": word}, conversation_id=c.id, format="json")
    mem.plans.put(s, c.id, {"steps": [word]})
    mem.iterations.append(s, c.id, "t", outcome="failed", error="boom")
    mem.checkpoints.save(s, "cp", "run1", {"at": word}, ttl_s=3600)
    mem.snapshots.put(s, c.id, "run1", {"snap": word})
    node = mem.nodes.open(s, "app", c.id, "node")
    node.add_turn(message_id=q.id, user_content=f"node {word}", assistant_content="a")
    node.flush()
    return c.id


def _export(mem: Memory, tenant: str | None = None, user: str | None = None) -> str:
    lines: list[str] = []
    mem.transfer.export(lines.append, tenant=tenant, user=user)
    return "\n".join(lines) + "\n"


def _fresh(tmp: Path) -> Memory:
    tmp.mkdir(parents=True, exist_ok=True)
    return Memory.open(f"sqlite:///{tmp / 'target.db'}", settings=Settings(home=tmp, worker="off"))


def test_export_import_export_is_byte_identical(
    memory: Memory, tmp_path: Path, models: Models
) -> None:
    tenant = fresh_scope().tenant
    alice, bob = Scope(tenant, "alice"), Scope(tenant, "bob", "agent1")
    cid = _fill(models, memory, alice, "tea")
    _fill(models, memory, bob, "jazz")
    first = _export(memory, tenant=tenant, user="alice") + _export(
        memory, tenant=tenant, user="bob"
    )
    target = _fresh(tmp_path / "t")
    try:
        a_lines = _export(memory, tenant=tenant, user="alice").splitlines()
        b_lines = _export(memory, tenant=tenant, user="bob").splitlines()
        got_a = target.transfer.import_(a_lines)
        target.transfer.import_(b_lines)
        assert got_a["added"] == got_a["rows"] > 20
        assert got_a["blobs"] >= 1
        again = _export(target, tenant=tenant, user="alice") + _export(
            target, tenant=tenant, user="bob"
        )
        assert again == first
        # What the import made works like the original: history, facts and their chain,
        # working memory, node memory, recall.
        h1 = memory.history(alice, cid)
        h2 = target.history(alice, cid)
        assert h1.to_dict() == h2.to_dict()
        assert [f.to_dict() for f in memory.facts.list(alice, status="all").items] == [
            f.to_dict() for f in target.facts.list(alice, status="all").items
        ]
        assert target.nodes.history(alice, "app", cid, "node").messages
        assert target.recall.search(alice, "Ünïcode", k=3)
        # Idempotent: importing again adds nothing and changes nothing.
        assert target.transfer.import_(a_lines)["added"] == 0
        assert _export(target, tenant=tenant, user="alice") == _export(
            memory, tenant=tenant, user="alice"
        )
    finally:
        target.close()


def test_a_whole_store_round_trips(tmp_path: Path, models: Models) -> None:
    source = _fresh(tmp_path / "s")
    target = _fresh(tmp_path / "t")
    try:
        _fill(models, source, Scope("acme", "u1"), "rain")
        source.keys.create("acme", user="u1", label="k")
        whole = _export(source)
        assert '"t":"api_keys"' in whole
        target.transfer.import_(whole.splitlines())
        assert _export(target) == whole
    finally:
        source.close()
        target.close()


def test_one_users_export_holds_only_that_user(memory: Memory, models: Models) -> None:
    tenant = fresh_scope().tenant
    _fill(models, memory, Scope(tenant, "alice"), "zebracanary")
    _fill(models, memory, Scope(tenant, "bob"), "lioncanary")
    out = _export(memory, tenant=tenant, user="alice")
    assert "zebracanary" in out
    assert "lioncanary" not in out
    assert '"bob"' not in out
    assert "secret_hash" not in out  # keys are the operator's, not the user's


def test_bad_exports_are_refused_and_write_nothing(tmp_path: Path) -> None:
    target = _fresh(tmp_path)
    try:
        for lines, match in [
            ([], "empty"),
            (['{"format": "other"}'], "not a memstrata export"),
            (['{"format": "memstrata", "version": 99, "tables": {}}'], "version"),
            (['{"format": "memstrata", "version": 1, "tables": {"nope": []}}'], "unknown table"),
            (
                [
                    '{"format": "memstrata", "version": 1, "tables": {"tenants": ["id", "created_at"]}}',
                    "not json",
                ],
                "line 2",
            ),
        ]:
            with pytest.raises(InvalidInput, match=match):
                target.transfer.import_(lines)
        assert _export(target).count("\n") == 1  # the header only
    finally:
        target.close()


def test_every_table_is_exported_or_named_derived(tmp_path: Path) -> None:
    mem = _fresh(tmp_path)
    try:

        def names() -> Op[set[str]]:
            rows = yield Query("SELECT name FROM sqlite_master WHERE type = 'table'")
            return {r[0] for r in rows}

        def columns(table: str) -> Op[list[str]]:
            rows = yield Query(f"PRAGMA table_info({table})")
            return [r[1] for r in rows]

        tables = {
            t
            for t in mem.core.engine.run(read(names))
            if not t.startswith(("sqlite_", "recall_terms_"))
        }
        exported = {t.name for t in TABLES}
        assert tables == exported | set(DERIVED)
        for spec in TABLES:
            actual = mem.core.engine.run(read(partial(columns, spec.name)))
            want = list(spec.columns) + (["seq"] if spec.serial else []) + list(spec.rebuilt)
            assert sorted(actual) == sorted(want), spec.name
    finally:
        mem.close()
