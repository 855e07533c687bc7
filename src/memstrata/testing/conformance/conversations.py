"""Conformance: creating, listing, updating and deleting conversations."""

from __future__ import annotations

import uuid

import pytest

from memstrata import Memory
from memstrata.errors import Conflict, InvalidInput, NotFound
from memstrata.testing.conformance.helpers import (
    _ids_of,
    _is_uuid7,
    fresh_scope,
    scope_state,
)
from memstrata.types import Scope


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
