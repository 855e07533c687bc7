"""Conformance: deletes cascade through derived data, atomically."""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence

import pytest

from memstrata import Memory
from memstrata.errors import NotFound
from memstrata.storage.plan import Exec, Op
from memstrata.testing.conformance.helpers import (
    _count_messages,
    _ids_of,
    fresh_scope,
    scope_state,
    sql_exec,
    sql_rows,
)
from memstrata.types import Scope


class _StepFailed(Exception):
    pass


class CascadeConformance:
    @pytest.fixture
    def derived_table(self, memory: Memory) -> Iterator[str]:
        """A table standing in for a feature's derived data, dropped after the test."""
        name = f"conformance_derived_{uuid.uuid4().hex[:12]}"
        sql_exec(
            memory,
            f"CREATE TABLE {name} (conversation_id TEXT NOT NULL, tenant_id TEXT NOT NULL, "
            "user_id TEXT NOT NULL, note TEXT)",
        )
        yield name
        sql_exec(memory, f"DROP TABLE {name}")

    def _populate(self, memory: Memory, scope: Scope, table: str) -> list[str]:
        cids = []
        for i in range(2):
            conv = memory.conversations.create(scope, title=f"c{i}")
            memory.messages.append(scope, conv.id, role="user", content="q")
            memory.messages.append(scope, conv.id, role="assistant", content="a")
            sql_exec(
                memory,
                f"INSERT INTO {table} (conversation_id, tenant_id, user_id, note) "
                "VALUES (?, ?, ?, ?)",
                (conv.id, scope.tenant, scope.user, "derived"),
            )
            cids.append(conv.id)
        return cids

    def _derived(self, memory: Memory, table: str, conversation_id: str) -> int:
        rows = sql_rows(
            memory, f"SELECT count(*) FROM {table} WHERE conversation_id = ?", (conversation_id,)
        )
        return int(rows[0][0])

    def _register(self, memory: Memory, table: str, *, fail_on: set[str]) -> Callable[[], None]:
        """Register steps that clean ``table``; returns a switch that turns them off.

        The steps stay registered on the runtime, so they are disarmed after the
        test rather than removed.
        """
        armed = [True]

        def conversation_step(ids: Sequence[str]) -> Op[None]:
            if not armed[0]:
                return
            marks = ", ".join("?" * len(ids))
            yield Exec(f"DELETE FROM {table} WHERE conversation_id IN ({marks})", list(ids))
            if fail_on & set(ids):
                raise _StepFailed("a derived-data step failed")

        def user_step(tenant: str, user: str) -> Op[None]:
            if not armed[0]:
                return
            yield Exec(f"DELETE FROM {table} WHERE tenant_id = ? AND user_id = ?", (tenant, user))
            if user in fail_on:
                raise _StepFailed("a derived-data step failed")

        memory.admin.runtime.cascade.on_conversation_delete(conversation_step)
        memory.admin.runtime.cascade.on_user_delete(user_step)

        def disarm() -> None:
            armed[0] = False

        return disarm

    def test_delete_conversation_removes_messages(self, memory: Memory) -> None:
        scope = fresh_scope()
        conv = memory.conversations.create(scope)
        keep = memory.conversations.create(scope)
        for c in (conv.id, keep.id):
            memory.messages.append(scope, c, role="user", content="q")
            memory.messages.append(scope, c, role="assistant", content="a")
        memory.conversations.delete(scope, conv.id)
        assert _count_messages(memory, conv.id) == 0
        assert _count_messages(memory, keep.id) == 2
        assert _ids_of(memory.conversations.list(scope).items) == [keep.id]

    def test_delete_user_removes_everything(self, memory: Memory) -> None:
        scope = fresh_scope()
        neighbour = Scope(scope.tenant, scope.user + "-n")
        cids = []
        for s in (scope, Scope(scope.tenant, scope.user, "bot"), neighbour):
            conv = memory.conversations.create(s)
            memory.messages.append(s, conv.id, role="user", content="q")
            cids.append(conv.id)
        key, secret = memory.keys.create(scope.tenant, user=scope.user)
        n_key, n_secret = memory.keys.create(scope.tenant, user=neighbour.user)
        assert memory.users.delete(scope) == 2  # both conversations, the agent's included
        for cid in cids[:2]:
            assert _count_messages(memory, cid) == 0
            assert sql_rows(memory, "SELECT id FROM conversations WHERE id = ?", (cid,)) == []
        assert memory.keys.authenticate(secret) is None
        assert key.id not in _ids_of(memory.keys.list(scope.tenant))
        users = [u for u, _ in memory.users.list(scope.tenant).items]
        assert users == [neighbour.user]
        # The neighbour keeps everything.
        assert _count_messages(memory, cids[2]) == 1
        assert memory.keys.authenticate(n_secret) is not None
        assert n_key.id in _ids_of(memory.keys.list(scope.tenant))
        with pytest.raises(NotFound):
            memory.users.delete(scope)

    def test_registered_steps_run(self, memory: Memory, derived_table: str) -> None:
        disarm = self._register(memory, derived_table, fail_on=set())
        try:
            scope = fresh_scope()
            gone, kept = self._populate(memory, scope, derived_table)
            memory.conversations.delete(scope, gone)
            assert self._derived(memory, derived_table, gone) == 0
            assert self._derived(memory, derived_table, kept) == 1
            other = fresh_scope()
            (o1, o2) = self._populate(memory, other, derived_table)
            memory.users.delete(other)
            assert self._derived(memory, derived_table, o1) == 0
            assert self._derived(memory, derived_table, o2) == 0
            assert self._derived(memory, derived_table, kept) == 1
        finally:
            disarm()

    def test_failing_conversation_step_deletes_nothing(
        self, memory: Memory, derived_table: str
    ) -> None:
        scope = fresh_scope()
        cids = self._populate(memory, scope, derived_table)
        disarm = self._register(memory, derived_table, fail_on={cids[0]})
        try:
            before = scope_state(memory, scope.tenant)
            with pytest.raises(_StepFailed):
                memory.conversations.delete(scope, cids[0])
            assert scope_state(memory, scope.tenant) == before
            assert self._derived(memory, derived_table, cids[0]) == 1
            with pytest.raises(_StepFailed):  # the user cascade goes through the same step
                memory.users.delete(scope)
            assert scope_state(memory, scope.tenant) == before
            assert self._derived(memory, derived_table, cids[1]) == 1
        finally:
            disarm()

    def test_failing_user_step_deletes_nothing(self, memory: Memory, derived_table: str) -> None:
        scope = fresh_scope()
        cids = self._populate(memory, scope, derived_table)
        memory.keys.create(scope.tenant, user=scope.user)
        disarm = self._register(memory, derived_table, fail_on={scope.user})
        try:
            before = scope_state(memory, scope.tenant)
            with pytest.raises(_StepFailed):
                memory.users.delete(scope)
            assert scope_state(memory, scope.tenant) == before
            assert all(self._derived(memory, derived_table, c) == 1 for c in cids)
        finally:
            disarm()
