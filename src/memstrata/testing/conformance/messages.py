"""Conformance: appending, putting, completing and editing messages."""

from __future__ import annotations

import uuid
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

import pytest

from memstrata import Memory
from memstrata.errors import Conflict, InvalidInput, NotFound
from memstrata.ids import UUID_NIL
from memstrata.testing.conformance.helpers import (
    _call,
    _ids,
    _is_uuid7,
    fresh_scope,
    memory_with_settings,
    scope_state,
)
from memstrata.types import FileRef, Message, Role, Scope, Status, ToolCall


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
        tok = memory.admin.runtime.tokenizer
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
        assert done.token_count == memory.admin.runtime.tokenizer.count_message(done.content)
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
