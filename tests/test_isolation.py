"""Scope isolation on the Python API, with canaries.

Three tenants with three users each, one extra user per tenant and an
agent-scoped scope each own conversations whose titles, metadata, message
contents, files and tool calls carry a canary string unique to that scope. Every
read of the facade, run by every scope on every conversation and message id in
the store, must return nothing holding another scope's canary, and must answer
NotFound for ids the scope does not own. Writes across scopes must fail the same
way and change nothing.
"""

from __future__ import annotations

import json
import uuid
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from memstrata import Memory, NotFound, Scope
from memstrata.conversation.history import History
from memstrata.testing.conformance import scope_state

TENANTS = ("acme", "globex", "initech")
USERS = ("alice", "bob", "carol")  # the same names in every tenant, on purpose


@dataclass
class World:
    mem: Memory
    scopes: list[Scope] = field(default_factory=list)
    canary: dict[Scope, str] = field(default_factory=dict)
    owner: dict[str, Scope] = field(default_factory=dict)  # conversation id -> scope
    conv_of: dict[str, str] = field(default_factory=dict)  # message id -> conversation id
    pending: dict[str, str] = field(default_factory=dict)  # pending message id -> conversation
    keys: dict[str, str] = field(default_factory=dict)  # key id -> tenant

    @property
    def conversations(self) -> list[str]:
        return list(self.owner)

    @property
    def messages(self) -> list[str]:
        return list(self.conv_of)

    def foreign(self, scope: Scope) -> list[str]:
        return [c for s, c in self.canary.items() if s != scope]

    def tenant_canaries(self, tenant: str) -> set[str]:
        return {c for s, c in self.canary.items() if s.tenant == tenant}


def _plant(w: World, scope: Scope) -> None:
    canary = f"CANARY{uuid.uuid4().hex}"
    w.scopes.append(scope)
    w.canary[scope] = canary
    mem = w.mem
    for k in range(2):
        conv = mem.conversations.create(
            scope, title=f"trip {k} {canary}", metadata={"owner": canary, "k": k}
        )
        w.owner[conv.id] = scope

        def add(**fields: Any) -> str:
            mid = mem.messages.append(scope, conv.id, **fields).id  # noqa: B023 - used at once
            w.conv_of[mid] = conv.id  # noqa: B023
            return mid

        system = add(role="system", content=f"You serve {canary}.")
        doc = {
            "type": "document",
            "transfer_method": "remote_url",
            "url": f"https://files.test/{canary}.pdf",
            "filename": f"{canary}.pdf",
        }
        add(role="user", content=f"Plan my trip, {canary}", files=[doc], metadata={"m": canary})
        call = {
            "id": f"call-{canary}",
            "type": "function",
            "function": {"name": "search", "arguments": json.dumps({"q": canary})},
        }
        asked = add(role="assistant", content="", tool_calls=[call])
        result = add(role="tool", content=f"found {canary}", tool_call_id=f"call-{canary}")
        add(role="assistant", content=f"Here it is, {canary}")
        add(role="assistant", content=f"Another take, {canary}", parent_id=result)
        add(role="user", content=f"Edited question {canary}", parent_id=system)
        add(role="assistant", content=f"Edited answer {canary}")
        pending = add(role="assistant", content="", status="pending")
        if k == 0:
            mem.messages.complete(scope, conv.id, pending, content=f"Streamed {canary}")
        else:
            w.pending[pending] = conv.id
        mem.conversations.set_active_leaf(scope, conv.id, asked if k == 0 else pending)
    key, _ = mem.keys.create(scope.tenant, user=scope.user, label=f"key {canary}")
    w.keys[key.id] = scope.tenant


@pytest.fixture(scope="module")
def world(module_memory: Memory) -> World:
    w = World(module_memory)
    for tenant in TENANTS:
        for user in USERS:
            _plant(w, Scope(tenant, user))
        _plant(w, Scope(tenant, f"only-{tenant}"))
    _plant(w, Scope(TENANTS[0], USERS[0], agent="planner"))
    _plant(w, Scope(TENANTS[1], USERS[1], agent="planner"))
    return w


def _text(result: Any) -> str:
    """Everything a caller could see in a result."""
    parts = [repr(result)]
    items = result.items if hasattr(result, "items") and not isinstance(result, dict) else None
    for obj in (
        items if isinstance(items, list) else result if isinstance(result, list) else [result]
    ):
        if hasattr(obj, "to_dict"):
            parts.append(json.dumps(obj.to_dict(), default=str, ensure_ascii=False))
    if isinstance(result, History):
        parts.append(json.dumps(result.to_openai(), ensure_ascii=False))
        parts.append(result.to_text())
    return "\n".join(parts)


def _assert_clean(w: World, scope: Scope, result: Any) -> None:
    text = _text(result)
    leaked = [c for c in w.foreign(scope) if c in text]
    assert not leaked, f"{scope} saw another scope's canary"


# Each read: (name, call, whether it needs a conversation, whether it needs a message).
Read = Callable[[Memory, Scope, str, str], Any]
READS: dict[str, Read] = {
    "conversations.get": lambda m, s, c, _: m.conversations.get(s, c),
    "messages.get": lambda m, s, c, i: m.messages.get(s, c, i),
    "messages.leaves": lambda m, s, c, _: m.messages.leaves(s, c, limit=500),
    "messages.path": lambda m, s, c, i: m.messages.path(s, c, i),
    "messages.path.active": lambda m, s, c, _: m.messages.path(s, c),
    "history": lambda m, s, c, i: m.history(s, c, leaf_id=i, max_tokens=None),
    "history.active": lambda m, s, c, _: m.history(s, c, max_tokens=50),
}
NEEDS_MESSAGE = {"messages.get", "messages.path", "history"}


def check_read(w: World, scope: Scope, name: str, cid: str, mid: str) -> None:
    """One read by ``scope``: allowed only on its own conversation (and a message in it)."""
    allowed = w.owner[cid] == scope and (name not in NEEDS_MESSAGE or w.conv_of[mid] == cid)
    if not allowed:
        with pytest.raises(NotFound):
            READS[name](w.mem, scope, cid, mid)
        return
    result = READS[name](w.mem, scope, cid, mid)
    _assert_clean(w, scope, result)
    # The scope's own data does come back (else the sweep could pass on empty answers);
    # a pending message is the one thing without a canary, and a small budget may drop all.
    if name != "history.active" and not (name == "messages.get" and mid in w.pending):
        assert w.canary[scope] in _text(result)


def test_the_world_is_what_it_seems(world: World) -> None:
    """The sweep below would pass on an empty store: make sure it is not one."""
    assert len(world.scopes) == 14
    assert len(world.conversations) == 28
    assert len(world.messages) == 28 * 9
    own = world.scopes[0]
    cid = next(c for c, s in world.owner.items() if s == own)
    assert world.canary[own] in _text(world.mem.history(own, cid, max_tokens=None))


def test_lists_show_only_the_scope(world: World) -> None:
    mem = world.mem
    for scope in world.scopes:
        page = mem.conversations.list(scope, limit=500)
        assert {c.id for c in page.items} == {c for c, s in world.owner.items() if s == scope}
        _assert_clean(world, scope, page)
    for tenant in TENANTS:
        users = {u for u, _ in mem.users.list(tenant, limit=500).items}
        assert users == {*USERS, f"only-{tenant}"}
        keys = mem.keys.list(tenant)
        assert {k.id for k in keys} == {k for k, t in world.keys.items() if t == tenant}
        text = repr(keys)
        others = {c for s, c in world.canary.items() if s.tenant != tenant}
        assert not [c for c in others if c in text]
        assert world.tenant_canaries(tenant) <= {c for c in world.canary.values() if c in text}
    assert mem.users.list("no-such-tenant").items == []


def test_every_read_by_every_scope(world: World) -> None:
    """The exhaustive sweep: every scope, every read, every conversation, and every message
    both in its own conversation and paired with each of the scope's conversations."""
    for scope in world.scopes:
        mine = [c for c, s in world.owner.items() if s == scope]
        for cid in world.conversations:
            some_mid = next(m for m, c in world.conv_of.items() if c == cid)
            for name in READS:
                if name not in NEEDS_MESSAGE:
                    check_read(world, scope, name, cid, some_mid)
        for mid, cid in world.conv_of.items():
            for name in NEEDS_MESSAGE:
                check_read(world, scope, name, cid, mid)
                check_read(world, scope, name, mine[0], mid)


def test_writes_across_scopes_change_nothing(world: World) -> None:
    mem = world.mem
    before = {t: scope_state(mem, t) for t in TENANTS}
    for scope in world.scopes:
        mine = next(c for c, s in world.owner.items() if s == scope)
        for cid, owner in world.owner.items():
            if owner == scope:
                continue
            mid = next(m for m, c in world.conv_of.items() if c == cid)
            attempts: list[Callable[[], Any]] = [
                lambda: mem.conversations.update(scope, cid, title="mine now"),  # noqa: B023
                lambda: mem.conversations.set_active_leaf(scope, cid, mid),  # noqa: B023
                lambda: mem.messages.append(scope, cid, role="user", content="hi"),  # noqa: B023
                lambda: mem.messages.append(  # another scope's message as parent
                    scope,  # noqa: B023
                    mine,  # noqa: B023
                    role="user",
                    content="hi",
                    parent_id=mid,  # noqa: B023
                ),
                lambda: mem.conversations.set_active_leaf(scope, mine, mid),  # noqa: B023
                lambda: mem.conversations.delete(scope, cid),  # noqa: B023
            ]
            for attempt in attempts:
                with pytest.raises(NotFound):
                    attempt()
        for pid, cid in world.pending.items():
            if world.owner[cid] != scope:
                with pytest.raises(NotFound):
                    mem.messages.complete(scope, cid, pid, content="stolen")
    # Only updated_at of the caller's own conversation may move (the failed appends
    # roll back), so compare everything.
    assert {t: scope_state(mem, t) for t in TENANTS} == before


def test_deleting_a_user_keeps_the_namesakes(module_memory: Memory) -> None:
    """Same user name in two tenants, and the same user with an agent: one delete, one owner."""
    mem = module_memory
    tag = uuid.uuid4().hex[:8]
    a, b = Scope(f"del-a-{tag}", "sam"), Scope(f"del-b-{tag}", "sam")
    for s in (a, b):
        conv = mem.conversations.create(s, title="keep me")
        mem.messages.append(s, conv.id, role="user", content="hello")
    mem.users.delete(a)
    assert mem.conversations.list(a).items == []
    assert [c.title for c in mem.conversations.list(b).items] == ["keep me"]


@settings(max_examples=settings().max_examples * 3)
@given(data=st.data())
def test_random_reads(world: World, data: st.DataObject) -> None:
    scope = data.draw(st.sampled_from(world.scopes), label="scope")
    name = data.draw(st.sampled_from(sorted(READS)), label="read")
    cid = data.draw(st.sampled_from(world.conversations), label="conversation")
    mid = data.draw(st.sampled_from(world.messages), label="message")
    check_read(world, scope, name, cid, mid)
