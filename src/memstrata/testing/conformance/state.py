"""Conformance tests for agent state and rolling summaries (every backend runs them)."""

from __future__ import annotations

import anyio
import pytest

from memstrata import AsyncMemory, Memory
from memstrata.errors import Expired, InvalidInput, NotFound, PreconditionFailed
from memstrata.testing.conformance.helpers import fresh_scope, sql_rows

__all__ = ["StateConformance"]


class StateConformance:
    def test_working_memory_cas(self, memory: Memory) -> None:
        scope = fresh_scope()
        first = memory.working.put(scope, "# User\n- likes tea", expected_version=0)
        assert (first.version, first.format, first.conversation_id) == (1, "markdown", None)
        second = memory.working.put(scope, "# User\n- likes coffee", expected_version=1)
        assert second.version == 2
        with pytest.raises(PreconditionFailed):
            memory.working.put(scope, "# stale", expected_version=1)
        with pytest.raises(PreconditionFailed):
            memory.working.put(scope, "# again", expected_version=0)
        assert memory.working.get(scope).content == "# User\n- likes coffee"
        # No expected version: last writer wins, the version still moves.
        assert memory.working.put(scope, "# free").version == 3
        with pytest.raises(NotFound):
            memory.working.get(fresh_scope())

    def test_working_memory_per_conversation_and_schema(self, memory: Memory) -> None:
        scope = fresh_scope()
        conv = memory.conversations.create(scope)
        schema = {
            "type": "object",
            "properties": {"name": {"type": "string"}, "tasks": {"type": "array"}},
            "required": ["name"],
            "additionalProperties": False,
        }
        doc = memory.working.put(
            scope, {"name": "Ada", "tasks": []}, conversation_id=conv.id, json_schema=schema
        )
        assert (doc.format, doc.conversation_id, doc.version) == ("json", conv.id, 1)
        with pytest.raises(InvalidInput):
            memory.working.put(scope, {"tasks": []}, conversation_id=conv.id)  # schema kept
        with pytest.raises(InvalidInput):
            memory.working.put(scope, {"name": "A", "x": 1}, conversation_id=conv.id)
        assert memory.working.get(scope, conversation_id=conv.id).content == {
            "name": "Ada",
            "tasks": [],
        }
        with pytest.raises(NotFound):  # the user-level document is a different one
            memory.working.get(scope)
        with pytest.raises(NotFound):  # another scope cannot reach the conversation's
            memory.working.get(fresh_scope(), conversation_id=conv.id)
        tmpl = memory.working.put(scope, {"role": "dev"}, template={"role": "", "team": ""})
        assert tmpl.template == {"role": "", "team": ""}
        with pytest.raises(InvalidInput):
            memory.working.put(scope, {"other": 1})

    def test_working_memory_format_follows_what_is_sent(self, memory: Memory) -> None:
        scope = fresh_scope()
        assert memory.working.put(scope, {"trip": "Oslo"}).format == "json"
        # Markdown after a JSON document is markdown, never a JSON string with escapes.
        doc = memory.working.put(scope, "# Trip\n- Oslo")
        assert (doc.format, doc.content, doc.text) == ("markdown", "# Trip\n- Oslo", doc.content)
        assert memory.working.get(scope).text == "# Trip\n- Oslo"
        assert memory.working.put(scope, ["a", 1]).format == "json"
        # A JSON string stays possible when asked for.
        assert memory.working.put(scope, "x", format="json").text == '"x"'
        # A document held to a schema refuses markdown rather than dropping its schema.
        schema = {"type": "object"}
        memory.working.put(scope, {"a": 1}, json_schema=schema)
        with pytest.raises(InvalidInput, match="json_schema"):
            memory.working.put(scope, "# notes")
        assert memory.working.get(scope).content == {"a": 1}

    def test_concurrent_cas_has_one_winner(self, memory: Memory) -> None:
        scope = fresh_scope()
        memory.working.put(scope, "v1")
        amem = AsyncMemory(memory.core)
        outcomes: list[str] = []

        async def writer(text: str) -> None:
            try:
                await amem.working.put(scope, text, expected_version=1)
                outcomes.append("won")
            except PreconditionFailed:
                outcomes.append("lost")

        async def race() -> None:
            async with anyio.create_task_group() as tg:
                for i in range(4):
                    tg.start_soon(writer, f"writer {i}")

        anyio.run(race)
        assert sorted(outcomes) == ["lost", "lost", "lost", "won"]
        assert memory.working.get(scope).version == 2

    def test_plan_versions(self, memory: Memory) -> None:
        scope = fresh_scope()
        conv = memory.conversations.create(scope)
        with pytest.raises(NotFound):
            memory.plans.get(scope, conv.id)
        plan = memory.plans.put(scope, conv.id, {"steps": ["a"]}, expected_version=0)
        assert plan.version == 1
        plan = memory.plans.put(scope, conv.id, {"steps": ["a", "b"]}, expected_version=1)
        with pytest.raises(PreconditionFailed):
            memory.plans.put(scope, conv.id, {"steps": []}, expected_version=1)
        assert memory.plans.get(scope, conv.id).document == {"steps": ["a", "b"]}
        with pytest.raises(NotFound):
            memory.plans.get(fresh_scope(), conv.id)

    def test_iterations_append_only(self, memory: Memory) -> None:
        scope = fresh_scope()
        conv = memory.conversations.create(scope)
        a = memory.iterations.append(scope, conv.id, "build", outcome="failed", error="E1")
        b = memory.iterations.append(scope, conv.id, "build", outcome="ok")
        c = memory.iterations.append(scope, conv.id, "deploy", outcome="ok")
        assert (a.attempt, b.attempt, c.attempt) == (1, 2, 1)
        page = memory.iterations.list(scope, conv.id, task="build")
        assert [(i.attempt, i.outcome, i.error) for i in page.items] == [
            (1, "failed", "E1"),
            (2, "ok", None),
        ]
        first = memory.iterations.list(scope, conv.id, limit=2)
        assert first.next_cursor is not None
        rest = memory.iterations.list(scope, conv.id, limit=2, cursor=first.next_cursor)
        assert [i.task for i in rest.items] == ["deploy"]
        with pytest.raises(NotFound):
            memory.iterations.list(fresh_scope(), conv.id)

    def test_checkpoints_expire(self, memory: Memory) -> None:
        scope = fresh_scope()
        clock = memory.admin.runtime.clock
        saved = memory.checkpoints.save(
            scope, "approve", "run-1", {"status": "suspended"}, ttl_s=60
        )
        assert saved.key == "approve:run-1"
        assert memory.checkpoints.load(scope, "approve", "run-1").state == {"status": "suspended"}
        with pytest.raises(NotFound):
            memory.checkpoints.load(fresh_scope(), "approve", "run-1")
        memory.admin.runtime.clock = lambda: clock() + 61_000_000
        try:
            with pytest.raises(Expired, match="This action has expired"):
                memory.checkpoints.load(scope, "approve", "run-1")
        finally:
            memory.admin.runtime.clock = clock
        memory.checkpoints.save(scope, "other", "run-1", {"n": 1})
        memory.checkpoints.delete(scope, "other", "run-1")
        with pytest.raises(Expired):
            memory.checkpoints.load(scope, "other", "run-1")
        with pytest.raises(NotFound):
            memory.checkpoints.delete(scope, "missing", "run-1")
        memory.checkpoints.save(scope, "other", "run-1", {"n": 2})  # save overwrites a tombstone
        assert memory.checkpoints.load(scope, "other", "run-1").state == {"n": 2}

    def test_snapshots(self, memory: Memory) -> None:
        scope = fresh_scope()
        conv = memory.conversations.create(scope)
        memory.snapshots.put(scope, conv.id, "r1", {"tree": [1]})
        memory.snapshots.put(scope, conv.id, "r1", {"tree": [1, 2]})
        assert memory.snapshots.get(scope, conv.id, "r1").data == {"tree": [1, 2]}
        with pytest.raises(NotFound):
            memory.snapshots.get(scope, conv.id, "r2")
        with pytest.raises(NotFound):
            memory.snapshots.get(fresh_scope(), conv.id, "r1")

    def test_state_cascades(self, memory: Memory) -> None:
        scope = fresh_scope()
        conv = memory.conversations.create(scope)
        for i in range(30):
            memory.messages.append(scope, conv.id, role="user", content=f"message {i} " * 20)
        memory.working.put(scope, "user doc")
        memory.working.put(scope, "conv doc", conversation_id=conv.id)
        memory.plans.put(scope, conv.id, {"a": 1})
        memory.iterations.append(scope, conv.id, "t", outcome="ok")
        memory.snapshots.put(scope, conv.id, "r", {})
        memory.checkpoints.save(scope, "c", "r", {}, conversation_id=conv.id)
        memory.checkpoints.save(scope, "u", "r", {})
        assert memory.compact(scope, conv.id).outcome == "compacted"
        tables = ("plans", "iteration_logs", "run_snapshots", "summaries", "compaction_log")
        memory.conversations.delete(scope, conv.id)
        for table in tables:
            rows = sql_rows(
                memory, f"SELECT count(*) FROM {table} WHERE conversation_id = ?", [conv.id]
            )
            assert rows[0][0] == 0, table
        assert memory.working.get(scope).content == "user doc"
        assert memory.checkpoints.load(scope, "u", "r").state == {}
        with pytest.raises(NotFound):
            memory.checkpoints.load(scope, "c", "r")
        memory.users.delete(scope)
        for table in ("working_memory", "checkpoints"):
            rows = sql_rows(
                memory,
                f"SELECT count(*) FROM {table} WHERE tenant_id = ? AND user_id = ?",
                [scope.tenant, scope.user],
            )
            assert rows[0][0] == 0, table

    def test_summary_serves_only_branches_through_it(self, memory: Memory) -> None:
        memory.compaction.kit.auto_compact = False
        scope = fresh_scope()
        conv = memory.conversations.create(scope)
        ids = []
        for i in range(40):
            role = "user" if i % 2 == 0 else "assistant"
            msg = memory.messages.append(scope, conv.id, role=role, content=f"turn {i} " * 15)
            ids.append(msg.id)
        # A branch that diverged early (after message 3).
        side = memory.messages.append(
            scope, conv.id, role="user", content="side question " * 10, parent_id=ids[3]
        )
        memory.conversations.set_active_leaf(scope, conv.id, ids[-1])
        result = memory.compact(scope, conv.id)
        assert result.outcome == "compacted"
        summary = memory.compaction.summary(scope, conv.id)
        assert summary.up_to_depth > 3
        ctx = memory.context(scope, conv.id, budget=100_000)
        assert ctx.report.summary_id == summary.id
        side_ctx = memory.context(scope, conv.id, leaf_id=side.id, budget=100_000)
        assert side_ctx.report.summary_id is None
        assert [m["content"] for m in side_ctx.messages][-1] == side.content
        with pytest.raises(NotFound):
            memory.compaction.summary(scope, conv.id, leaf_id=side.id)
