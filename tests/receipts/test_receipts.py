"""Deletion receipts through the Python API, on every backend: counts per table and blob
prefix, a verification scan that finds nothing left, ids but never content, scoping."""

from __future__ import annotations

import json
import uuid
from collections.abc import Sequence

import pytest

from memstrata import Memory, Scope
from memstrata.errors import NotFound
from memstrata.receipts import Receipt, UserDeleted
from memstrata.receipts.verify import SKIPPED
from memstrata.storage.plan import Exec, Op, Query, read, write
from support import node_objects_holding

T = "rcpt"


def _tables(mem: Memory) -> dict[str, list[str]]:
    """Every (table, columns) of the store, read independently of the receipts' scan."""

    def op() -> Op[dict[str, list[str]]]:
        out: dict[str, list[str]] = {}
        if mem.core.engine.dialect == "postgres":
            rows = yield Query(
                "SELECT table_name, column_name FROM information_schema.columns "
                "WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position"
            )
            for t, c in rows:
                out.setdefault(t, []).append(c)
            return out
        tables = yield Query("SELECT name FROM sqlite_master WHERE type = 'table'")
        for (t,) in tables:
            if not t.startswith("sqlite_"):
                cols = yield Query(f"SELECT name FROM pragma_table_info('{t}')")
                out[t] = [c[0] for c in cols]
        return out

    return mem.core.engine.run(read(op))


def canary_rows(mem: Memory, canary: str) -> list[str]:
    """``table.column: n`` for every column holding the canary (receipts included)."""
    tables = _tables(mem)

    def op() -> Op[list[str]]:
        found = []
        for table, columns in tables.items():
            for column in columns:
                rows = yield Query(
                    f'SELECT count(*) FROM "{table}" WHERE CAST("{column}" AS TEXT) LIKE ?',
                    (f"%{canary}%",),
                )
                if rows[0][0]:
                    found.append(f"{table}.{column}: {rows[0][0]}")
        return found

    return mem.core.engine.run(read(op))


def plant(mem: Memory, scope: Scope, canary: str) -> str:
    """A conversation with the canary in messages (and so the recall index), a fact, working
    memory (user-wide and per conversation), a plan, a snapshot, a checkpoint, node memory
    blobs; returns the conversation id."""
    conv = mem.conversations.create(scope, title=f"trip {canary}")
    first = mem.messages.append(scope, conv.id, role="user", content=f"I live in {canary}")
    mem.messages.append(scope, conv.id, role="assistant", content=f"Noted, {canary}")
    mem.facts.add(scope, f"lives in {canary}")
    mem.working.put(scope, f"user-wide {canary}")
    mem.working.put(scope, f"per conversation {canary}", conversation_id=conv.id)
    mem.plans.put(scope, conv.id, {"step": canary})
    mem.snapshots.put(scope, conv.id, "run1", {"ui": canary})
    mem.checkpoints.save(scope, "graph", "run1", {"s": canary}, conversation_id=conv.id)
    mem.nodes.add_turn(
        scope, "app", conv.id, "node", message_id=first.id,
        user_content=f"node asks {canary}", assistant_content=f"node answers {canary}",
    )  # fmt: skip
    return conv.id


def test_user_deletion_receipt_counts_and_verifies_with_no_canary_left(memory: Memory) -> None:
    scope = Scope(T, f"victim-{uuid.uuid4().hex[:8]}")
    canary = f"CANARY{uuid.uuid4().hex}"
    cid = plant(memory, scope, canary)
    second = memory.conversations.create(scope).id
    assert canary_rows(memory, canary)  # the plant landed
    assert node_objects_holding(memory, canary)

    done = memory.users.delete(scope)
    assert isinstance(done, UserDeleted)
    assert done == 2  # the conversations removed, as before receipts
    r = done.receipt
    assert r.kind == "user"
    assert r.subject_ids == [scope.user, cid, second]
    assert r.actor == "python"
    for table in ("users", "conversations", "messages", "facts", "working_memory", "plans",
                  "run_snapshots", "checkpoints", "recall_docs", "node_memories"):  # fmt: skip
        assert r.tables.get(table, 0) > 0, (table, r.tables)
    assert r.tables["conversations"] == 2
    assert len(r.blobs) == 1
    ((prefix, objects),) = r.blobs.items()
    assert f"/{cid}/" in prefix
    assert objects > 0
    assert r.verified is True, r.findings
    assert r.findings == []
    assert r.verified_at is not None

    # An independent scan agrees: the canary is nowhere, not even in the receipt.
    assert canary_rows(memory, canary) == []
    assert node_objects_holding(memory, canary) == []
    assert canary not in json.dumps(r.to_dict())
    # Stored: the tenant's admins read it back as returned.
    assert memory.receipts.get(T, r.id) == r


def test_receipts_are_kept_when_their_user_goes_and_hidden_from_a_new_namesake(
    memory: Memory,
) -> None:
    scope = Scope(T, "namesake")
    cid = memory.conversations.create(scope).id
    earlier = memory.conversations.delete(scope, cid)
    assert memory.receipts.get(scope, earlier.id) == earlier  # the user's own deletion
    gone = memory.users.delete(scope).receipt
    with pytest.raises(NotFound):
        memory.receipts.get(scope, gone.id)  # a user never reads its own deletion
    memory.conversations.create(scope)  # the name is used again: someone else
    for rid in (earlier.id, gone.id):
        with pytest.raises(NotFound):
            memory.receipts.get(scope, rid)
        assert memory.receipts.get(T, rid).id == rid  # admins still do
        assert memory.receipts.get(scope, rid, admin=True).id == rid


def test_conversation_receipt(memory: Memory) -> None:
    scope = Scope(T, "conv-owner")
    canary = f"CANARY{uuid.uuid4().hex}"
    cid = plant(memory, scope, canary)
    kept = memory.conversations.create(scope)
    memory.messages.append(scope, kept.id, role="user", content="kept message")
    r = memory.conversations.delete(scope, cid)
    assert isinstance(r, Receipt)
    assert (r.kind, r.subject_ids, r.user) == ("conversation", [cid], scope.user)
    assert r.tables["conversations"] == 1
    assert r.tables["messages"] == 2
    assert r.tables["plans"] == 1
    assert sum(r.blobs.values()) > 0
    assert r.verified is True, r.findings
    # User-wide data and the fact stay: only the conversation went.
    left = canary_rows(memory, canary)
    assert any(x.startswith("facts.") for x in left)
    assert not any(x.startswith(("messages.", "plans.", "conversations.")) for x in left)
    assert node_objects_holding(memory, canary) == []
    assert canary not in json.dumps(r.to_dict())
    assert memory.history(scope, kept.id).messages  # another conversation untouched


def test_message_receipt_names_the_subtree(memory: Memory) -> None:
    scope = Scope(T, "msg-owner")
    cid = memory.conversations.create(scope).id
    root = memory.messages.append(scope, cid, role="user", content="keep me")
    q = memory.messages.append(scope, cid, role="user", content="SECRET question")
    a = memory.messages.append(scope, cid, role="assistant", content="SECRET answer")
    r = memory.messages.delete(scope, cid, q.id)
    assert r.kind == "message"
    assert r.subject_ids[0] == cid
    assert sorted(r.subject_ids[1:]) == sorted([q.id, a.id])
    assert r.tables["messages"] == 2
    assert r.verified is True, r.findings
    assert "SECRET" not in json.dumps(r.to_dict())
    assert [m.id for m in memory.history(scope, cid).messages] == [root.id]


def test_fact_receipt(memory: Memory) -> None:
    scope = Scope(T, "fact-owner")
    fact = memory.facts.add(scope, "SECRET allergy")
    r = memory.facts.delete(scope, fact.id)
    assert (r.kind, r.subject_ids) == ("fact", [fact.id])
    assert r.tables["facts"] == 1
    assert r.verified is True
    assert "SECRET" not in json.dumps(r.to_dict())


def test_receipts_are_scoped(memory: Memory) -> None:
    alice, bob = Scope(T, "alice"), Scope(T, "bob")
    r = memory.facts.delete(alice, memory.facts.add(alice, "x").id)
    assert memory.receipts.get(alice, r.id).id == r.id
    for owner in (bob, Scope("other", "alice"), "other"):
        with pytest.raises(NotFound):
            memory.receipts.get(owner, r.id)
    for rid in ("nope", "", "x" * 500):
        with pytest.raises(NotFound):
            memory.receipts.get(T, rid)


def test_failed_deletion_leaves_no_receipt(memory: Memory) -> None:
    scope = Scope(T, "nobody-here")
    with pytest.raises(NotFound):
        memory.conversations.delete(scope, "no-such-conversation")
    with pytest.raises(NotFound):
        memory.users.delete(Scope(T, "never-existed"))

    def count() -> Op[int]:
        rows = yield Query("SELECT count(*) FROM deletion_receipts")
        return int(rows[0][0])

    assert memory.core.engine.run(read(count)) == 0


def test_verification_reports_what_is_left_in_a_table_added_later(memory: Memory) -> None:
    """A table no feature declared (as a later feature's would be) is scanned too; the
    finding names the table and column, never the value."""
    scope = Scope(T, "leaky")
    cid = memory.conversations.create(scope).id

    def add_table() -> Op[None]:
        yield Exec("CREATE TABLE later_feature (conversation_id TEXT, note TEXT)")
        yield Exec("INSERT INTO later_feature VALUES (?, ?)", (cid, "SECRET"))

    memory.core.engine.run(write(add_table))
    r = memory.conversations.delete(scope, cid)
    assert r.verified is False
    assert r.findings == [
        "later_feature.conversation_id: 1 rows name a deleted id",
        "later_feature.conversation_id: 1 rows contain a deleted id",
    ]
    assert "SECRET" not in json.dumps(r.to_dict())
    # A table declared as keeping ids on purpose (tombstones) is not a leftover.
    memory.core.rt.cascade.keeps_ids.add("later_feature")
    again = memory.receipts.verify(T, r.id)
    assert again.verified is True
    assert again.tables == r.tables


def test_rows_removed_by_a_cascade_step_added_later_are_counted(memory: Memory) -> None:
    def add_table() -> Op[None]:
        yield Exec("CREATE TABLE later_rows (conversation_id TEXT)")

    memory.core.engine.run(write(add_table))

    def step(ids: Sequence[str]) -> Op[None]:
        marks = ", ".join("?" * len(ids))
        yield Exec(f"DELETE FROM later_rows WHERE conversation_id IN ({marks})", ids)

    memory.core.rt.cascade.on_conversation_delete(step)
    scope = Scope(T, "counted")
    cid = memory.conversations.create(scope).id

    def fill() -> Op[None]:
        for _ in range(3):
            yield Exec("INSERT INTO later_rows VALUES (?)", (cid,))

    memory.core.engine.run(write(fill))
    r = memory.conversations.delete(scope, cid)
    assert r.tables["later_rows"] == 3
    assert r.verified is True


def test_the_scan_skips_only_receipts_and_migrations() -> None:
    assert frozenset({"deletion_receipts", "schema_migrations"}) == SKIPPED


def test_receipts_follow_retention_a_year_by_default(memory: Memory) -> None:
    scope = Scope(T, "kept-a-year")
    r = memory.facts.delete(scope, memory.facts.add(scope, "x").id)
    assert memory.retention.apply()["receipts"] == 0  # young: kept
    now = memory.core.rt.clock()
    memory.core.rt.clock = lambda: now + 366 * 86400 * 1_000_000
    assert memory.retention.apply(dry_run=True)["receipts"] == 1
    assert memory.retention.apply()["receipts"] == 1
    with pytest.raises(NotFound):
        memory.receipts.get(T, r.id)


def test_a_receipts_policy_is_honoured(memory: Memory) -> None:
    scope = Scope(T, "short-lived")
    r = memory.facts.delete(scope, memory.facts.add(scope, "x").id)
    memory.retention.set(T, "receipts", 3600)
    now = memory.core.rt.clock()
    memory.core.rt.clock = lambda: now + 2 * 3600 * 1_000_000
    assert memory.retention.apply()["receipts"] == 1
    with pytest.raises(NotFound):
        memory.receipts.get(T, r.id)


def test_a_message_of_the_same_id_elsewhere_is_not_a_leftover(memory: Memory) -> None:
    """Message ids are unique per conversation: deleting one leaves another conversation's
    message of the same id alone, and the scan does not mistake it for a leftover."""
    scope = Scope(T, "same-ids")
    mid = "0196f1c2-7e8a-7b2c-9d3e-4f5a6b7c8d9e"
    first = memory.conversations.create(scope).id
    second = memory.conversations.create(scope).id
    for cid in (first, second):
        memory.messages.append(scope, cid, id=mid, role="user", content="same id")
    r = memory.messages.delete(scope, first, mid)
    assert r.verified is True, r.findings
    assert [m.id for m in memory.history(scope, second).messages] == [mid]
    # A leftover in the deleted message's own conversation is still found.

    def plant() -> Op[None]:
        yield Exec(
            "UPDATE conversations SET metadata = ? WHERE id = ?", (f'{{"m": "{mid}"}}', first)
        )

    memory.core.engine.run(write(plant))
    again = memory.receipts.verify(scope, r.id)
    assert again.findings == ["conversations.metadata: 1 rows contain a deleted id"]


def test_on_a_large_store_the_scan_runs_as_a_job(
    memory: Memory, monkeypatch: pytest.MonkeyPatch
) -> None:
    # The store counts as large past the setting (a copy, so the fixture's is untouched).
    settings = memory.core.settings.model_copy(update={"receipts_inline_scan_max_messages": 0})
    monkeypatch.setattr(memory.core, "settings", settings)
    scope = Scope(T, "large-store")
    kept = memory.conversations.create(scope).id
    memory.messages.append(scope, kept, role="user", content="the store is not empty")
    cid = memory.conversations.create(scope).id
    memory.messages.append(scope, cid, role="user", content="one")
    r = memory.conversations.delete(scope, cid)
    assert (r.verified, r.verified_at, r.tables["messages"]) == (None, None, 1)
    assert memory.receipts.get(scope, r.id).verified is None
    assert memory.jobs.run_pending(["receipts.verify"]) == 1
    done = memory.receipts.get(scope, r.id)
    assert done.verified is True
    assert done.verified_at is not None
    assert done.tables == r.tables


def test_a_node_memory_cleared_before_the_deletion_leaves_nothing(memory: Memory) -> None:
    """A clear leaves its blobs to a purge job whose payload names the conversation; the
    conversation's deletion purges them now and drops that job too."""
    scope = Scope(T, "cleared-node")
    cid = memory.conversations.create(scope).id
    first = memory.messages.append(scope, cid, role="user", content="hi")
    memory.nodes.add_turn(scope, "app", cid, "node", message_id=first.id, user_content="q")
    memory.nodes.delete(scope, "app", cid, "node")  # cleared: its purge job waits
    r = memory.conversations.delete(scope, cid)
    assert r.verified is True, r.findings
    assert r.tables["jobs"] >= 1
    assert sum(r.blobs.values()) >= 1
