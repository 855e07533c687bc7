"""The backend conformance suite: one set of tests every storage backend must pass.

The classes here are pytest mixins. A backend's test module subclasses them and
provides a fixture named ``memory`` that yields an open
:class:`~memstrata.Memory` on that backend::

    import pytest
    from memstrata import Memory
    from memstrata.testing.conformance import BackendConformance

    class TestMyBackend(BackendConformance):
        @pytest.fixture
        def memory(self, tmp_path):
            mem = Memory.open("mydb://...")
            yield mem
            mem.close()

Tests go through the public facade (sync, and async for a subset) and look at
raw rows only through the engine's own plans, with SQL in the dialect subset
every backend accepts. Every test works in its own freshly named tenant, so a
backend may share one database between tests.
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator, Sequence
from datetime import UTC, datetime
from typing import Any

import anyio
import pytest

from memstrata import AsyncMemory, Memory
from memstrata.api.core import Core
from memstrata.errors import Conflict, InvalidInput, NotFound
from memstrata.ids import UUID_NIL
from memstrata.runtime import Limits, Runtime
from memstrata.storage.plan import Exec, Op, Query, Row, read, write
from memstrata.storage.schema import MIGRATIONS
from memstrata.tokens import get_tokenizer
from memstrata.types import FileRef, Message, Role, Scope, Status, ToolCall

__all__ = [
    "AppendConformance",
    "AsyncParityConformance",
    "BackendConformance",
    "CascadeConformance",
    "ConversationConformance",
    "HistoryConformance",
    "KeysConformance",
    "MigrationConformance",
    "fresh_scope",
    "memory_with_settings",
    "scope_state",
    "sql_exec",
    "sql_rows",
]


# -- helpers (public: a backend's own tests may use them) ------------------------------------


def fresh_scope(agent: str | None = None, *, user: str | None = None) -> Scope:
    """A scope in a tenant no other test uses."""
    return Scope(f"t-{uuid.uuid4().hex[:16]}", user or f"u-{uuid.uuid4().hex[:8]}", agent)


def _rows_op(sql: str, params: Sequence[Any]) -> Op[list[Row]]:
    rows = yield Query(sql, params)
    return list(rows)


def _exec_op(sql: str, params: Sequence[Any]) -> Op[int]:
    n = yield Exec(sql, params)
    return int(n)


def sql_rows(memory: Memory, sql: str, params: Sequence[Any] = ()) -> list[Row]:
    """Rows of one query, run by the memory's own engine (``?`` placeholders)."""
    return memory.core.engine.run(read(lambda: _rows_op(sql, params)))


def sql_exec(memory: Memory, sql: str, params: Sequence[Any] = ()) -> int:
    """Run one writing statement in its own transaction; returns the affected rows."""
    return memory.core.engine.run(write(lambda: _exec_op(sql, params)))


def scope_state(memory: Memory, tenant: str) -> dict[str, list[Row]]:
    """Every stored row that belongs to ``tenant``, to prove a failed call wrote nothing."""
    t = (tenant,)
    return {
        "tenants": sql_rows(memory, "SELECT id FROM tenants WHERE id = ?", t),
        "users": sql_rows(memory, "SELECT id FROM users WHERE tenant_id = ? ORDER BY id", t),
        "conversations": sql_rows(
            memory,
            "SELECT id, title, metadata, active_leaf_id, message_count, updated_at "
            "FROM conversations WHERE tenant_id = ? ORDER BY id",
            t,
        ),
        "messages": sql_rows(
            memory,
            "SELECT m.id, m.parent_id, m.status, m.content, m.token_count, m.branch_tokens "
            "FROM messages m JOIN conversations c ON c.id = m.conversation_id "
            "WHERE c.tenant_id = ? ORDER BY m.id",
            t,
        ),
        "keys": sql_rows(
            memory, "SELECT id, revoked_at FROM api_keys WHERE tenant_id = ? ORDER BY id", t
        ),
    }


def memory_with_settings(memory: Memory, **changes: Any) -> Memory:
    """Another facade on the same engine, with ``changes`` applied to its settings.

    The runtime is rebuilt from the changed settings (tokenizer, limits) with a
    cascade of its own; the engine is shared, so close only ``memory``.
    """
    settings = memory.core.settings.model_copy(update=changes)
    rt = Runtime(
        tokenizer=get_tokenizer(settings.token_encoding),
        limits=Limits(max_content_bytes=settings.max_content_bytes),
    )
    return Memory(Core(memory.core.engine, rt, settings))


def _is_uuid7(value: str) -> bool:
    u = uuid.UUID(value)
    return u.version == 7 and u.variant == uuid.RFC_4122 and str(u) == value


def _count_messages(memory: Memory, conversation_id: str) -> int:
    rows = sql_rows(
        memory, "SELECT count(*) FROM messages WHERE conversation_id = ?", (conversation_id,)
    )
    return int(rows[0][0])


def _cost(memory: Memory, *messages: Message) -> int:
    tok = memory.core.rt.tokenizer
    return sum(tok.count_message(m.content, m.tool_calls, m.files) for m in messages)


def _ids(messages: Sequence[Message]) -> list[str]:
    return [m.id for m in messages]


def _call(
    call_id: str, name: str = "lookup", arguments: str = '{"q": "weather"}'
) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}


# -- conversations ---------------------------------------------------------------------------


class ConversationConformance:
    def test_create_and_get(self, memory: Memory) -> None:
        scope = fresh_scope()
        conv = memory.conversations.create(scope, title="Trip plans", metadata={"k": [1, 2]})
        assert _is_uuid7(conv.id)
        assert (conv.tenant, conv.user, conv.agent) == (scope.tenant, scope.user, None)
        assert conv.title == "Trip plans"
        assert conv.metadata == {"k": [1, 2]}
        assert conv.active_leaf_id is None
        assert conv.message_count == 0
        assert memory.conversations.get(scope, conv.id) == conv
        assert conv.to_dict()["id"] == conv.id

    def test_client_supplied_id(self, memory: Memory) -> None:
        scope = fresh_scope()
        cid = str(uuid.uuid4())
        conv = memory.conversations.create(scope, id=cid)
        assert conv.id == cid
        with pytest.raises(Conflict):
            memory.conversations.create(scope, id=cid)
        with pytest.raises(Conflict):  # an id is global: another scope cannot take it either
            memory.conversations.create(fresh_scope(), id=cid)
        with pytest.raises(InvalidInput):
            memory.conversations.create(scope, id="not-a-uuid")

    def test_list_newest_first_with_cursor(self, memory: Memory) -> None:
        scope = fresh_scope()
        made = [memory.conversations.create(scope, title=f"c{i}").id for i in range(5)]
        memory.conversations.create(fresh_scope(), title="someone else")
        seen: list[str] = []
        cursor: str | None = None
        pages = 0
        while True:
            page = memory.conversations.list(scope, limit=2, cursor=cursor)
            assert len(page.items) <= 2
            seen.extend(c.id for c in page.items)
            pages += 1
            cursor = page.next_cursor
            if cursor is None:
                break
        assert seen == made[::-1]
        assert pages == 3
        assert _ids_of(memory.conversations.list(scope).items) == made[::-1]
        with pytest.raises(InvalidInput):
            memory.conversations.list(scope, limit=0)
        with pytest.raises(InvalidInput):
            memory.conversations.list(scope, cursor="%%%not-ours")

    def test_update(self, memory: Memory) -> None:
        scope = fresh_scope()
        conv = memory.conversations.create(scope, title="old")
        updated = memory.conversations.update(scope, conv.id, title="new", metadata={"a": 1})
        assert (updated.title, updated.metadata) == ("new", {"a": 1})
        assert memory.conversations.get(scope, conv.id) == updated
        kept = memory.conversations.update(scope, conv.id, metadata={"b": 2})
        assert (kept.title, kept.metadata) == ("new", {"b": 2})

    def test_other_scopes_cannot_see_or_touch(self, memory: Memory) -> None:
        owner = fresh_scope()
        conv = memory.conversations.create(owner, title="mine")
        mid = memory.messages.append(owner, conv.id, role="user", content="hi").id
        others = [
            Scope(owner.tenant, owner.user + "x"),
            Scope(owner.tenant + "x", owner.user),
            Scope(owner.tenant, owner.user, agent="bot"),
        ]
        before = scope_state(memory, owner.tenant)
        for other in others:
            with pytest.raises(NotFound):
                memory.conversations.get(other, conv.id)
            assert memory.conversations.list(other).items == []
            with pytest.raises(NotFound):
                memory.conversations.update(other, conv.id, title="stolen")
            with pytest.raises(NotFound):
                memory.conversations.set_active_leaf(other, conv.id, mid)
            with pytest.raises(NotFound):
                memory.conversations.delete(other, conv.id)
        assert scope_state(memory, owner.tenant) == before

    def test_agent_scope_is_separate(self, memory: Memory) -> None:
        user = fresh_scope()
        agent = Scope(user.tenant, user.user, agent="planner")
        mine = memory.conversations.create(user)
        theirs = memory.conversations.create(agent)
        assert theirs.agent == "planner"
        assert _ids_of(memory.conversations.list(user).items) == [mine.id]
        assert _ids_of(memory.conversations.list(agent).items) == [theirs.id]

    def test_set_active_leaf(self, memory: Memory) -> None:
        scope = fresh_scope()
        conv = memory.conversations.create(scope)
        a = memory.messages.append(scope, conv.id, role="user", content="a")
        b = memory.messages.append(scope, conv.id, role="assistant", content="b")
        assert memory.conversations.get(scope, conv.id).active_leaf_id == b.id
        assert memory.conversations.set_active_leaf(scope, conv.id, a.id).active_leaf_id == a.id
        assert memory.conversations.get(scope, conv.id).active_leaf_id == a.id
        other = memory.conversations.create(scope)
        foreign = memory.messages.append(scope, other.id, role="user", content="x")
        with pytest.raises(NotFound):
            memory.conversations.set_active_leaf(scope, conv.id, foreign.id)
        with pytest.raises(NotFound):
            memory.conversations.set_active_leaf(scope, conv.id, str(uuid.uuid4()))
        assert memory.conversations.get(scope, conv.id).active_leaf_id == a.id

    def test_delete(self, memory: Memory) -> None:
        scope = fresh_scope()
        conv = memory.conversations.create(scope)
        memory.conversations.delete(scope, conv.id)
        with pytest.raises(NotFound):
            memory.conversations.get(scope, conv.id)
        with pytest.raises(NotFound):
            memory.conversations.delete(scope, conv.id)

    def test_scope_must_be_a_scope(self, memory: Memory) -> None:
        with pytest.raises(InvalidInput):
            memory.conversations.create(("t", "u"))  # type: ignore[arg-type]
        with pytest.raises(InvalidInput):
            memory.conversations.list(None)  # type: ignore[arg-type]

    @pytest.mark.parametrize(
        ("tenant", "user", "agent"),
        [
            ("", "u", None),
            ("t", "", None),
            ("has space", "u", None),
            ("t", "a/b", None),
            ("t", "u", ""),
            ("-leading", "u", None),
            ("t", "x" * 129, None),
        ],
    )
    def test_bad_scope_names(self, tenant: str, user: str, agent: str | None) -> None:
        with pytest.raises(InvalidInput):
            Scope(tenant, user, agent)

    def test_unknown_conversation(self, memory: Memory) -> None:
        scope = fresh_scope()
        memory.conversations.create(scope)
        for cid in (str(uuid.uuid4()), "garbage"):
            with pytest.raises(NotFound):
                memory.conversations.get(scope, cid)
            with pytest.raises(NotFound):
                memory.messages.append(scope, cid, role="user", content="hi")
            with pytest.raises(NotFound):
                memory.history(scope, cid)


def _ids_of(items: Sequence[Any]) -> list[str]:
    return [item.id for item in items]


# -- appending -------------------------------------------------------------------------------


class AppendConformance:
    def test_omitted_parent_follows_active_leaf(self, memory: Memory) -> None:
        scope = fresh_scope()
        conv = memory.conversations.create(scope)
        a = memory.messages.append(scope, conv.id, role="user", content="a")
        b = memory.messages.append(scope, conv.id, role="assistant", content="b")
        assert a.parent_id is None
        assert b.parent_id == a.id
        assert memory.conversations.get(scope, conv.id).active_leaf_id == b.id
        memory.conversations.set_active_leaf(scope, conv.id, a.id)
        c = memory.messages.append(scope, conv.id, role="assistant", content="c")
        assert c.parent_id == a.id  # a regeneration made by moving the leaf first
        assert memory.conversations.get(scope, conv.id).active_leaf_id == c.id

    def test_none_parent_starts_a_new_root(self, memory: Memory) -> None:
        scope = fresh_scope()
        conv = memory.conversations.create(scope)
        memory.messages.append(scope, conv.id, role="user", content="a")
        root = memory.messages.append(scope, conv.id, role="user", content="b", parent_id=None)
        assert root.parent_id is None
        assert root.depth == 0
        assert memory.conversations.get(scope, conv.id).active_leaf_id == root.id
        assert _ids(memory.messages.path(scope, conv.id)) == [root.id]

    def test_explicit_parent_makes_a_sibling(self, memory: Memory) -> None:
        scope = fresh_scope()
        conv = memory.conversations.create(scope)
        q = memory.messages.append(scope, conv.id, role="user", content="question")
        first = memory.messages.append(scope, conv.id, role="assistant", content="answer one")
        memory.messages.append(scope, conv.id, role="user", content="follow-up")
        second = memory.messages.append(
            scope, conv.id, role="assistant", content="answer two", parent_id=q.id
        )
        assert second.parent_id == q.id
        assert second.depth == first.depth
        assert memory.conversations.get(scope, conv.id).active_leaf_id == second.id
        assert _ids(memory.messages.path(scope, conv.id)) == [q.id, second.id]
        edit = memory.messages.append(
            scope, conv.id, role="user", content="question, edited", parent_id=None
        )
        assert edit.depth == 0

    def test_parent_elsewhere_is_not_found(self, memory: Memory) -> None:
        scope = fresh_scope()
        conv = memory.conversations.create(scope)
        memory.messages.append(scope, conv.id, role="user", content="mine")
        other_conv = memory.conversations.create(scope)
        same_scope = memory.messages.append(scope, other_conv.id, role="user", content="x")
        stranger = fresh_scope()
        s_conv = memory.conversations.create(stranger)
        other_scope = memory.messages.append(stranger, s_conv.id, role="user", content="y")
        before = (scope_state(memory, scope.tenant), scope_state(memory, stranger.tenant))
        for parent in (same_scope.id, other_scope.id, str(uuid.uuid4()), "garbage"):
            with pytest.raises(NotFound):
                memory.messages.append(
                    scope, conv.id, role="assistant", content="reply", parent_id=parent
                )
        after = (scope_state(memory, scope.tenant), scope_state(memory, stranger.tenant))
        assert after == before

    def test_cannot_append_to_another_scopes_conversation(self, memory: Memory) -> None:
        owner = fresh_scope()
        conv = memory.conversations.create(owner)
        memory.messages.append(owner, conv.id, role="user", content="hi")
        before = scope_state(memory, owner.tenant)
        with pytest.raises(NotFound):
            memory.messages.append(fresh_scope(), conv.id, role="user", content="intrude")
        with pytest.raises(NotFound):
            memory.messages.append(
                Scope(owner.tenant, owner.user, "bot"), conv.id, role="user", content="intrude"
            )
        assert scope_state(memory, owner.tenant) == before

    def test_depth_tokens_seq_and_ids(self, memory: Memory) -> None:
        scope = fresh_scope()
        conv = memory.conversations.create(scope)
        tok = memory.core.rt.tokenizer
        made: list[Message] = []
        made.append(memory.messages.append(scope, conv.id, role="system", content="Be brief."))
        made.append(memory.messages.append(scope, conv.id, role="user", content="Weather?"))
        made.append(
            memory.messages.append(
                scope, conv.id, role="assistant", content="", tool_calls=[_call("c1")]
            )
        )
        made.append(
            memory.messages.append(scope, conv.id, role="tool", content="sunny", tool_call_id="c1")
        )
        made.append(memory.messages.append(scope, conv.id, role="assistant", content="Sunny."))
        made.append(
            memory.messages.append(
                scope, conv.id, role="assistant", content="It is sunny!", parent_id=made[3].id
            )
        )
        made.append(
            memory.messages.append(scope, conv.id, role="user", content="x", parent_id=None)
        )
        by_id = {m.id: m for m in made}
        for m in made:
            assert _is_uuid7(m.id)
            assert m.token_count == tok.count_message(m.content, m.tool_calls, m.files)
            parent = by_id.get(m.parent_id) if m.parent_id else None
            if parent is None:
                assert (m.depth, m.branch_tokens) == (0, m.token_count)
            else:
                assert m.depth == parent.depth + 1
                assert m.branch_tokens == parent.branch_tokens + m.token_count
            assert memory.messages.get(scope, conv.id, m.id) == m
        seqs = [m.seq for m in made]
        assert seqs == sorted(seqs)
        assert len(set(seqs)) == len(seqs)
        assert [m.id for m in made] == sorted(m.id for m in made)  # time-ordered ids
        assert memory.conversations.get(scope, conv.id).message_count == len(made)

    def test_fields_round_trip(self, memory: Memory) -> None:
        scope = fresh_scope()
        conv = memory.conversations.create(scope)
        when = datetime(2020, 5, 17, 12, 30, tzinfo=UTC)
        image = FileRef(type="image", transfer_method="remote_url", url="https://x.test/a.png")
        m = memory.messages.append(
            scope,
            conv.id,
            role="user",
            content="see this",
            files=[image],
            metadata={"lang": "en", "n": 3},
            occurred_at=when,
        )
        got = memory.messages.get(scope, conv.id, m.id)
        assert got.files == (image,)
        assert got.metadata == {"lang": "en", "n": 3}
        assert got.occurred_at == when
        assert got.status is Status.COMPLETE
        assert got.role is Role.USER
        a = memory.messages.append(scope, conv.id, role="assistant", tool_calls=[_call("c9")])
        assert a.content == ""
        assert a.tool_calls == (ToolCall.model_validate(_call("c9")),)
        assert memory.messages.get(scope, conv.id, a.id).tool_calls == a.tool_calls

    def test_idempotent_put(self, memory: Memory) -> None:
        scope = fresh_scope()
        conv = memory.conversations.create(scope)
        q = memory.messages.append(scope, conv.id, role="user", content="q")
        mid = str(uuid.uuid4())
        first, created = memory.messages.put(
            scope, conv.id, id=mid, role="assistant", content="hello"
        )
        assert created is True
        assert first.id == mid
        state = scope_state(memory, scope.tenant)
        again, created = memory.messages.put(
            scope, conv.id, id=mid, role="assistant", content="hello"
        )
        assert created is False
        assert again == first
        assert scope_state(memory, scope.tenant) == state  # a replay writes nothing
        same_parent, created = memory.messages.put(
            scope, conv.id, id=mid, role="assistant", content="hello", parent_id=q.id
        )
        assert (same_parent, created) == (first, False)
        before = scope_state(memory, scope.tenant)
        with pytest.raises(Conflict):
            memory.messages.put(scope, conv.id, id=mid, role="assistant", content="other")
        with pytest.raises(Conflict):
            memory.messages.put(scope, conv.id, id=mid, role="user", content="hello")
        with pytest.raises(Conflict):
            memory.messages.put(
                scope, conv.id, id=mid, role="assistant", content="hello", parent_id=None
            )
        assert scope_state(memory, scope.tenant) == before  # a refused id writes nothing
        # Ids are per conversation: the same id in another one is a message of its own.
        other = memory.conversations.create(scope)
        elsewhere, created = memory.messages.put(
            scope, other.id, id=mid, role="assistant", content="other"
        )
        assert created is True
        assert (elsewhere.id, elsewhere.conversation_id) == (mid, other.id)
        assert memory.messages.get(scope, conv.id, mid) == first
        assert memory.conversations.get(scope, conv.id).message_count == 2

    def test_pending_lifecycle(self, memory: Memory) -> None:
        scope = fresh_scope()
        conv = memory.conversations.create(scope)
        q = memory.messages.append(scope, conv.id, role="user", content="Tell me a story")
        pending = memory.messages.append(
            scope, conv.id, role="assistant", content="", status="pending"
        )
        assert pending.status is Status.PENDING
        assert pending.content == ""
        h = memory.history(scope, conv.id)
        assert h.leaf_id == pending.id
        assert _ids(h.messages) == [q.id]
        before = scope_state(memory, scope.tenant)
        with pytest.raises(Conflict):  # after the active leaf, which is pending
            memory.messages.append(scope, conv.id, role="user", content="more")
        with pytest.raises(Conflict):
            memory.messages.append(
                scope, conv.id, role="user", content="more", parent_id=pending.id
            )
        assert scope_state(memory, scope.tenant) == before
        done = memory.messages.complete(scope, conv.id, pending.id, content="Once upon a time.")
        assert done.status is Status.COMPLETE
        assert done.content == "Once upon a time."
        assert done.token_count == memory.core.rt.tokenizer.count_message(done.content)
        assert done.branch_tokens == q.branch_tokens + done.token_count
        assert memory.messages.get(scope, conv.id, pending.id) == done
        assert _ids(memory.history(scope, conv.id).messages) == [q.id, done.id]
        with pytest.raises(Conflict):
            memory.messages.complete(scope, conv.id, pending.id, content="again")
        with pytest.raises(Conflict):
            memory.messages.complete(scope, conv.id, q.id, content="rewrite")
        with pytest.raises(NotFound):
            memory.messages.complete(scope, conv.id, str(uuid.uuid4()), content="x")
        with pytest.raises(NotFound):
            memory.messages.complete(fresh_scope(), conv.id, pending.id, content="x")
        reply = memory.messages.append(scope, conv.id, role="user", content="The end?")
        assert reply.parent_id == done.id

    def test_pending_needs_assistant_and_empty_content(self, memory: Memory) -> None:
        scope = fresh_scope()
        conv = memory.conversations.create(scope)
        memory.messages.append(scope, conv.id, role="user", content="q")
        before = scope_state(memory, scope.tenant)
        with pytest.raises(InvalidInput):
            memory.messages.append(scope, conv.id, role="user", content="", status="pending")
        with pytest.raises(InvalidInput):
            memory.messages.append(
                scope, conv.id, role="assistant", content="partial", status="pending"
            )
        assert scope_state(memory, scope.tenant) == before
        pending = memory.messages.append(
            scope, conv.id, role="assistant", content="", status="pending"
        )
        with pytest.raises(InvalidInput):
            memory.messages.complete(scope, conv.id, pending.id, content="")
        assert memory.messages.get(scope, conv.id, pending.id).status is Status.PENDING

    @pytest.mark.parametrize(
        "fields",
        [
            {"role": "robot", "content": "hi"},
            {"role": "user", "content": ""},
            {"role": "assistant", "content": ""},
            {"role": "tool", "content": "42"},
            {"role": "user", "content": "x", "tool_calls": [_call("c1")]},
            {"role": "assistant", "content": "x", "tool_call_id": "c1"},
            {"role": "user", "content": "x", "unknown_field": 1},
            {"role": "user", "content": "x", "files": [{"type": "image"}]},
            {"role": "user", "content": "x", "status": "deleted"},
            {"role": "user", "content": "x", "id": "not-a-uuid"},
        ],
        ids=[
            "bad-role",
            "empty-user",
            "empty-assistant",
            "tool-without-call-id",
            "tool-calls-on-user",
            "call-id-on-assistant",
            "unknown-field",
            "bad-file",
            "bad-status",
            "bad-id",
        ],
    )
    def test_invalid_messages_write_nothing(self, memory: Memory, fields: dict[str, Any]) -> None:
        scope = fresh_scope()
        conv = memory.conversations.create(scope)
        memory.messages.append(scope, conv.id, role="user", content="q")
        before = scope_state(memory, scope.tenant)
        with pytest.raises(InvalidInput):
            memory.messages.append(scope, conv.id, **fields)
        assert scope_state(memory, scope.tenant) == before

    @pytest.mark.parametrize("bad", ["\x00", "\ud800"], ids=["nul", "lone-surrogate"])
    def test_unstorable_text_is_invalid(self, memory: Memory, bad: str) -> None:
        scope = fresh_scope()
        conv = memory.conversations.create(scope)
        memory.messages.append(scope, conv.id, role="user", content="q")
        attempts: list[Callable[[], object]] = [
            lambda: memory.messages.append(scope, conv.id, role="user", content=f"a{bad}b"),
            lambda: memory.messages.append(
                scope, conv.id, role="tool", content="r", tool_call_id=f"c{bad}"
            ),
            lambda: memory.conversations.create(scope, title=f"t{bad}"),
            lambda: memory.conversations.update(scope, conv.id, title=f"t{bad}"),
        ]
        if bad != "\x00":  # NUL inside JSON is escaped, so only the surrogate is refused there
            attempts += [
                lambda: memory.messages.append(
                    scope, conv.id, role="user", content="x", metadata={"k": bad}
                ),
                lambda: memory.conversations.create(scope, metadata={"k": bad}),
                lambda: memory.messages.append(
                    scope, conv.id, role="assistant", tool_calls=[_call("c1", arguments=bad)]
                ),
                lambda: memory.messages.append(
                    scope,
                    conv.id,
                    role="user",
                    content="x",
                    files=[{"type": "image", "transfer_method": "remote_url", "url": bad}],
                ),
            ]
        before = scope_state(memory, scope.tenant)
        for attempt in attempts:
            with pytest.raises(InvalidInput):
                attempt()
        pending = memory.messages.append(
            scope, conv.id, role="assistant", content="", status="pending"
        )
        before = scope_state(memory, scope.tenant)
        with pytest.raises(InvalidInput):
            memory.messages.complete(scope, conv.id, pending.id, content=f"a{bad}")
        assert scope_state(memory, scope.tenant) == before

    def test_content_byte_limit(self, memory: Memory) -> None:
        small = memory_with_settings(memory, max_content_bytes=64)
        scope = fresh_scope()
        conv = small.conversations.create(scope)
        small.messages.append(scope, conv.id, role="user", content="a" * 64)  # at the limit
        before = scope_state(memory, scope.tenant)
        with pytest.raises(InvalidInput):
            small.messages.append(scope, conv.id, role="assistant", content="a" * 65)
        with pytest.raises(InvalidInput):  # bytes, not characters
            small.messages.append(scope, conv.id, role="assistant", content="é" * 33)
        pending = small.messages.append(
            scope, conv.id, role="assistant", content="", status="pending"
        )
        before = scope_state(memory, scope.tenant)
        with pytest.raises(InvalidInput):
            small.messages.complete(scope, conv.id, pending.id, content="b" * 65)
        assert scope_state(memory, scope.tenant) == before

    def test_legacy_nil_parent_follows_newest_by_seq(self, memory: Memory) -> None:
        scope = fresh_scope()
        conv = memory.conversations.create(scope)
        first = memory.messages.append(scope, conv.id, role="user", content="a", parent_id=UUID_NIL)
        assert first.parent_id is None  # nothing before it: a root
        b = memory.messages.append(scope, conv.id, role="assistant", content="b")
        c = memory.messages.append(
            scope, conv.id, role="assistant", content="c", parent_id=first.id
        )
        memory.conversations.set_active_leaf(scope, conv.id, b.id)
        d = memory.messages.append(scope, conv.id, role="user", content="d", parent_id=UUID_NIL)
        assert d.parent_id == c.id  # newest by server order, not the active leaf
        assert d.depth == c.depth + 1
        assert d.branch_tokens == c.branch_tokens + d.token_count
        assert memory.conversations.get(scope, conv.id).active_leaf_id == d.id

    def test_leaves_and_path(self, memory: Memory) -> None:
        scope = fresh_scope()
        conv = memory.conversations.create(scope)
        assert memory.messages.leaves(scope, conv.id).items == []
        assert memory.messages.path(scope, conv.id) == []
        q = memory.messages.append(scope, conv.id, role="user", content="q")
        a1 = memory.messages.append(scope, conv.id, role="assistant", content="a1")
        a2 = memory.messages.append(scope, conv.id, role="assistant", content="a2", parent_id=q.id)
        q2 = memory.messages.append(scope, conv.id, role="user", content="q2")
        assert _ids(memory.messages.leaves(scope, conv.id).items) == [a1.id, q2.id]
        page = memory.messages.leaves(scope, conv.id, limit=1)
        assert _ids(page.items) == [a1.id]
        assert page.next_cursor is not None
        rest = memory.messages.leaves(scope, conv.id, limit=1, cursor=page.next_cursor)
        assert _ids(rest.items) == [q2.id]
        assert _ids(memory.messages.path(scope, conv.id)) == [q.id, a2.id, q2.id]
        assert _ids(memory.messages.path(scope, conv.id, a1.id)) == [q.id, a1.id]
        with pytest.raises(NotFound):
            memory.messages.path(scope, conv.id, str(uuid.uuid4()))
        with pytest.raises(NotFound):
            memory.messages.get(scope, conv.id, "garbage")


# -- history ---------------------------------------------------------------------------------


class _Turns:
    """A conversation with a system message, a greeting and three turns, one with tools."""

    def __init__(self, memory: Memory) -> None:
        self.scope = fresh_scope()
        add = memory.messages.append
        self.cid = memory.conversations.create(self.scope).id
        s, c = self.scope, self.cid
        self.system = [add(s, c, role="system", content="You are a careful travel agent.")]
        self.greeting = [add(s, c, role="assistant", content="Hello! Where to?")]
        self.t1 = [
            add(s, c, role="user", content="I want to see Lisbon in May."),
            add(s, c, role="assistant", content="Lisbon in May is lovely; about 22 degrees."),
        ]
        self.t2 = [
            add(s, c, role="user", content="Find me a flight from Berlin."),
            add(s, c, role="assistant", content="", tool_calls=[_call("f1", "flights")]),
            add(s, c, role="tool", content='[{"flight": "TP 551", "eur": 189}]', tool_call_id="f1"),
            add(s, c, role="assistant", content="TP 551 costs 189 euros."),
        ]
        self.t3 = [
            add(s, c, role="user", content="Book it."),
            add(s, c, role="assistant", content="Booked: TP 551, seat 14C."),
        ]


class HistoryConformance:
    def test_empty_conversation(self, memory: Memory) -> None:
        scope = fresh_scope()
        conv = memory.conversations.create(scope)
        h = memory.history(scope, conv.id)
        assert (h.leaf_id, h.messages, h.tokens, h.truncated, h.over_budget) == (
            None,
            [],
            0,
            False,
            False,
        )

    def test_everything_fits(self, memory: Memory) -> None:
        t = _Turns(memory)
        every = t.system + t.greeting + t.t1 + t.t2 + t.t3
        h = memory.history(t.scope, t.cid, max_tokens=None)
        assert _ids(h.messages) == _ids(every)
        assert h.tokens == _cost(memory, *every)
        assert (h.truncated, h.over_budget) == (False, False)
        assert h.leaf_id == t.t3[-1].id
        assert memory.history(t.scope, t.cid, max_tokens=h.tokens).messages == h.messages

    def test_whole_turns_dropped_oldest_first(self, memory: Memory) -> None:
        t = _Turns(memory)
        fixed = _cost(memory, *t.system)
        budget = fixed + _cost(memory, *t.t3, *t.t2) - 1  # turn 2 misses by one token
        h = memory.history(t.scope, t.cid, max_tokens=budget)
        assert _ids(h.messages) == _ids(t.system + t.t3)
        assert (h.truncated, h.over_budget) == (True, False)
        assert h.tokens == fixed + _cost(memory, *t.t3)
        h = memory.history(t.scope, t.cid, max_tokens=budget + 1)
        assert _ids(h.messages) == _ids(t.system + t.t2 + t.t3)
        # The greeting before the first user message is a turn of its own.
        h = memory.history(t.scope, t.cid, max_tokens=_cost(memory, *t.system, *t.t1, *t.t2, *t.t3))
        assert _ids(h.messages) == _ids(t.system + t.t1 + t.t2 + t.t3)
        assert h.truncated is True

    def test_newest_turn_kept_over_budget(self, memory: Memory) -> None:
        t = _Turns(memory)
        for budget in (0, 1, _cost(memory, *t.system)):
            h = memory.history(t.scope, t.cid, max_tokens=budget)
            assert _ids(h.messages) == _ids(t.system + t.t3)
            assert (h.truncated, h.over_budget) == (True, True)
            assert h.tokens == _cost(memory, *t.system, *t.t3)

    def test_max_messages(self, memory: Memory) -> None:
        t = _Turns(memory)
        h = memory.history(t.scope, t.cid, max_tokens=None, max_messages=5)
        assert _ids(h.messages) == _ids(t.system + t.t3)  # turn 2 (4 messages) would make 6
        assert h.truncated is True
        h = memory.history(t.scope, t.cid, max_tokens=None, max_messages=6)
        assert _ids(h.messages) == _ids(t.system + t.t2 + t.t3)
        h = memory.history(t.scope, t.cid, max_tokens=None, max_messages=1)
        assert _ids(h.messages) == _ids(t.system + t.t3)  # the newest turn is always kept

    def test_leaf_selects_the_branch(self, memory: Memory) -> None:
        t = _Turns(memory)
        alt = memory.messages.append(
            t.scope,
            t.cid,
            role="assistant",
            content="Booked seat 2A instead.",
            parent_id=t.t3[0].id,
        )
        h = memory.history(t.scope, t.cid, max_tokens=None)
        assert _ids(h.messages)[-2:] == [t.t3[0].id, alt.id]
        h = memory.history(t.scope, t.cid, leaf_id=t.t3[1].id, max_tokens=None)
        assert _ids(h.messages)[-2:] == [t.t3[0].id, t.t3[1].id]
        h = memory.history(t.scope, t.cid, leaf_id=t.t1[0].id, max_tokens=None)
        assert _ids(h.messages) == _ids(t.system + t.greeting + t.t1[:1])

    def test_model_picks_the_encoding(self, memory: Memory) -> None:
        scope = fresh_scope()
        conv = memory.conversations.create(scope)
        texts = [
            "Привет! Как дела? Расскажи мне о погоде в Москве.",
            "В Москве сегодня солнечно и тепло, около двадцати градусов.",
            "Спасибо большое, это очень полезная информация.",
            "Пожалуйста, обращайтесь в любое время.",
        ]
        for i, text in enumerate(texts):
            memory.messages.append(
                scope, conv.id, role="user" if i % 2 == 0 else "assistant", content=text
            )
        default = memory.history(scope, conv.id, max_tokens=None)
        gpt4 = memory.history(scope, conv.id, max_tokens=None, model="gpt-4")
        cl100k = get_tokenizer("gpt-4")
        assert gpt4.encoding == "cl100k_base"
        assert gpt4.tokens == sum(cl100k.count_message(t) for t in texts)
        assert default.tokens == _cost(memory, *default.messages)
        assert gpt4.tokens != default.tokens
        small, big = sorted((gpt4.tokens, default.tokens))
        cut_model = "gpt-4" if gpt4.tokens == big else None
        h = memory.history(scope, conv.id, max_tokens=small, model=cut_model)
        assert h.truncated is True
        assert len(h.messages) == 2
        other = None if cut_model == "gpt-4" else "gpt-4"
        assert len(memory.history(scope, conv.id, max_tokens=small, model=other).messages) == 4

    def test_invalid_arguments(self, memory: Memory) -> None:
        t = _Turns(memory)
        with pytest.raises(InvalidInput):
            memory.history(t.scope, t.cid, max_tokens=-1)
        with pytest.raises(InvalidInput):
            memory.history(t.scope, t.cid, max_messages=0)
        with pytest.raises(NotFound):
            memory.history(t.scope, t.cid, leaf_id=str(uuid.uuid4()))
        with pytest.raises(NotFound):
            memory.history(fresh_scope(), t.cid)

    def test_to_openai(self, memory: Memory) -> None:
        scope = fresh_scope()
        conv = memory.conversations.create(scope)
        add = memory.messages.append
        image = {"type": "image", "transfer_method": "remote_url", "url": "https://x.test/p.png"}
        doc = {"type": "document", "transfer_method": "local_file", "upload_file_id": "up-1",
               "filename": "plan.pdf"}  # fmt: skip
        add(scope, conv.id, role="system", content="sys")
        add(scope, conv.id, role="user", content="What is this?", files=[image, doc])
        add(scope, conv.id, role="assistant", content="", tool_calls=[_call("c1", "inspect")])
        add(scope, conv.id, role="tool", content="a cat", tool_call_id="c1")
        add(scope, conv.id, role="assistant", content="A cat.")
        out = memory.history(scope, conv.id).to_openai()
        assert [m["role"] for m in out] == ["system", "user", "assistant", "tool", "assistant"]
        assert all("id" not in m for m in out)
        assert out[0]["content"] == "sys"
        parts = out[1]["content"]
        assert isinstance(parts, list)
        url = {"url": "https://x.test/p.png", "detail": "high"}  # Dify's default detail
        assert {"type": "image_url", "image_url": url} in parts
        texts = [p["text"] for p in parts if p["type"] == "text"]
        assert "What is this?" in texts
        assert any("plan.pdf" in t for t in texts)
        assert out[2]["tool_calls"] == [_call("c1", "inspect")]
        assert not out[2]["content"]
        assert out[3] == {"role": "tool", "content": "a cat", "tool_call_id": "c1"}
        assert out[4] == {"role": "assistant", "content": "A cat."}

    def test_to_text(self, memory: Memory) -> None:
        scope = fresh_scope()
        conv = memory.conversations.create(scope)
        add = memory.messages.append
        image = {"type": "image", "transfer_method": "remote_url", "url": "https://x.test/p.png"}
        add(scope, conv.id, role="system", content="sys")
        add(scope, conv.id, role="user", content="Look", files=[image])
        add(scope, conv.id, role="assistant", content="Nice picture.")
        h = memory.history(scope, conv.id)
        assert h.to_text() == "Human: [image] Look\nAssistant: Nice picture."
        assert h.to_text(human_prefix="U", ai_prefix="A") == "U: [image] Look\nA: Nice picture."

    def test_to_dict(self, memory: Memory) -> None:
        t = _Turns(memory)
        h = memory.history(t.scope, t.cid, max_tokens=None)
        d = h.to_dict()
        assert d["leaf_id"] == h.leaf_id
        assert [m["id"] for m in d["messages"]] == _ids(h.messages)
        assert (d["tokens"], d["truncated"], d["over_budget"]) == (h.tokens, False, False)
        assert set(d["messages"][0]) == {
            "id",
            "role",
            "content",
            "files",
            "tool_calls",
            "tool_call_id",
        }


# -- cascades --------------------------------------------------------------------------------


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

        memory.core.rt.cascade.on_conversation_delete(conversation_step)
        memory.core.rt.cascade.on_user_delete(user_step)

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


# -- migrations ------------------------------------------------------------------------------


class MigrationConformance:
    def test_migrations_recorded(self, memory: Memory) -> None:
        engine = memory.core.engine
        versions = [m.version for m in MIGRATIONS[engine.dialect]]
        assert engine.schema_version() == max(versions)
        rows = sql_rows(memory, "SELECT version FROM schema_migrations ORDER BY version")
        assert [int(r[0]) for r in rows] == versions
        assert engine.migrate() == []
        assert engine.schema_version() == max(versions)


# -- keys ------------------------------------------------------------------------------------


class KeysConformance:
    def test_create_authenticate_list_revoke(self, memory: Memory) -> None:
        scope = fresh_scope()
        user_key, user_secret = memory.keys.create(scope.tenant, user=scope.user, label="ci")
        admin_key, admin_secret = memory.keys.create(scope.tenant, admin=True)
        other_key, _ = memory.keys.create(fresh_scope().tenant, admin=True)
        assert user_secret != admin_secret
        p = memory.keys.authenticate(user_secret)
        assert p is not None
        assert (p.key_id, p.tenant, p.user, p.admin) == (
            user_key.id,
            scope.tenant,
            scope.user,
            False,
        )
        p = memory.keys.authenticate(admin_secret)
        assert p is not None
        assert (p.key_id, p.tenant, p.user, p.admin) == (admin_key.id, scope.tenant, None, True)
        listed = memory.keys.list(scope.tenant)
        assert sorted(_ids_of(listed)) == sorted([user_key.id, admin_key.id])
        assert other_key.id not in _ids_of(listed)
        assert {k.label for k in listed} == {"ci", None}
        assert all(k.revoked_at is None for k in listed)
        assert scope.user in [u for u, _ in memory.users.list(scope.tenant).items]
        memory.keys.revoke(user_key.id)
        assert memory.keys.authenticate(user_secret) is None
        assert memory.keys.authenticate(admin_secret) is not None
        revoked = {k.id: k for k in memory.keys.list(scope.tenant)}[user_key.id]
        assert revoked.revoked_at is not None
        with pytest.raises(NotFound):
            memory.keys.revoke("no-such-key")

    def test_unknown_secrets(self, memory: Memory) -> None:
        _, secret = memory.keys.create(fresh_scope().tenant, admin=True)
        for wrong in ("", "msk_nope", secret + "x", secret[:-1], secret.upper()):
            assert memory.keys.authenticate(wrong) is None

    def test_secrets_not_stored(self, memory: Memory) -> None:
        scope = fresh_scope()
        secrets = [
            memory.keys.create(scope.tenant, user=scope.user)[1],
            memory.keys.create(scope.tenant, admin=True)[1],
        ]
        rows = sql_rows(memory, "SELECT * FROM api_keys WHERE tenant_id = ?", (scope.tenant,))
        assert len(rows) == 2
        stored = repr(rows)
        for secret in secrets:
            assert secret not in stored
            assert secret.rsplit("_", 1)[-1] not in stored  # nor its random part

    def test_invalid_key_requests(self, memory: Memory) -> None:
        tenant = fresh_scope().tenant
        before = scope_state(memory, tenant)
        with pytest.raises(InvalidInput):
            memory.keys.create(tenant)
        with pytest.raises(InvalidInput):
            memory.keys.create(tenant, user="u", admin=True)
        with pytest.raises(InvalidInput):
            memory.keys.create("bad tenant", admin=True)
        with pytest.raises(InvalidInput):
            memory.keys.create(tenant, user="bad/user")
        assert scope_state(memory, tenant) == before


# -- async parity ----------------------------------------------------------------------------


class AsyncParityConformance:
    """The async facade over the same core gives the same results and errors."""

    def test_async_builds_the_same_history(self, memory: Memory) -> None:
        amem = AsyncMemory(memory.core)
        scope = fresh_scope()

        async def build() -> tuple[str, list[Message]]:
            conv = await amem.conversations.create(scope, title="async")
            made = [await amem.messages.append(scope, conv.id, role="system", content="sys")]
            for i in range(4):
                made.append(
                    await amem.messages.append(scope, conv.id, role="user", content=f"q{i}")
                )
                made.append(
                    await amem.messages.append(scope, conv.id, role="assistant", content=f"a{i}")
                )
            made.append(
                await amem.messages.append(
                    scope, conv.id, role="assistant", content="alt", parent_id=made[-2].id
                )
            )
            return conv.id, made

        cid, made = anyio.run(build)
        assert memory.conversations.get(scope, cid).active_leaf_id == made[-1].id
        for m in made:
            assert memory.messages.get(scope, cid, m.id) == m
        budget = _cost(memory, made[0], *made[-3:])

        async def read_back() -> list[Any]:
            return [
                await amem.history(scope, cid, max_tokens=budget),
                await amem.history(scope, cid, leaf_id=made[-2].id, max_tokens=None),
                await amem.messages.path(scope, cid),
                (await amem.messages.leaves(scope, cid)).items,
                (await amem.conversations.list(scope)).items,
            ]

        got = anyio.run(read_back)
        want = [
            memory.history(scope, cid, max_tokens=budget),
            memory.history(scope, cid, leaf_id=made[-2].id, max_tokens=None),
            memory.messages.path(scope, cid),
            memory.messages.leaves(scope, cid).items,
            memory.conversations.list(scope).items,
        ]
        assert got == want
        assert got[0].truncated is True
        assert _ids(got[0].messages) == [made[0].id, made[-3].id, made[-1].id]

    def test_async_errors_match(self, memory: Memory) -> None:
        amem = AsyncMemory(memory.core)
        scope = fresh_scope()
        conv = memory.conversations.create(scope)
        mid = str(uuid.uuid4())
        memory.messages.put(scope, conv.id, id=mid, role="user", content="q")

        async def attempt(kind: str) -> None:
            if kind == "other-scope":
                await amem.conversations.get(fresh_scope(), conv.id)
            elif kind == "idempotency":
                await amem.messages.put(scope, conv.id, id=mid, role="user", content="other")
            elif kind == "invalid":
                await amem.messages.append(scope, conv.id, role="tool", content="x")
            elif kind == "replay":
                stored, created = await amem.messages.put(
                    scope, conv.id, id=mid, role="user", content="q"
                )
                assert (stored.id, created) == (mid, False)

        anyio.run(attempt, "replay")
        for kind, error in (
            ("other-scope", NotFound),
            ("idempotency", Conflict),
            ("invalid", InvalidInput),
        ):
            with pytest.raises(error):
                anyio.run(attempt, kind)

    def test_async_pending_keys_and_delete(self, memory: Memory) -> None:
        amem = AsyncMemory(memory.core)
        scope = fresh_scope()
        conv = memory.conversations.create(scope)
        memory.messages.append(scope, conv.id, role="user", content="q")

        async def flow() -> tuple[Message, str]:
            pending = await amem.messages.append(
                scope, conv.id, role="assistant", content="", status="pending"
            )
            done = await amem.messages.complete(scope, conv.id, pending.id, content="done")
            _, secret = await amem.keys.create(scope.tenant, user=scope.user)
            await amem.conversations.delete(scope, conv.id)
            return done, secret

        done, secret = anyio.run(flow)
        assert done.status is Status.COMPLETE
        principal = memory.keys.authenticate(secret)
        assert principal is not None
        assert principal.user == scope.user
        assert _count_messages(memory, conv.id) == 0
        with pytest.raises(NotFound):
            memory.conversations.get(scope, conv.id)


# Feature mixins import the helpers above, so they are imported after them.
from memstrata.testing.conformance_graph import GraphConformance  # noqa: E402
from memstrata.testing.conformance_state import StateConformance  # noqa: E402


class BackendConformance(
    StateConformance,
    GraphConformance,
    ConversationConformance,
    AppendConformance,
    HistoryConformance,
    CascadeConformance,
    MigrationConformance,
    KeysConformance,
    AsyncParityConformance,
):
    """Every conformance test; a backend's test class inherits this and provides ``memory``."""
