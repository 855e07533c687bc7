"""Conformance: the async facade gives the results and errors of the sync one."""

from __future__ import annotations

import uuid
from typing import Any

import anyio
import pytest

from memstrata import AsyncMemory, Memory
from memstrata.errors import Conflict, InvalidInput, NotFound
from memstrata.testing.conformance.helpers import (
    _cost,
    _count_messages,
    _ids,
    fresh_scope,
)
from memstrata.types import Message, Status


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
