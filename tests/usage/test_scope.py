"""Whom a model call is for: the context variable the job runner and the facade bind."""

from __future__ import annotations

import anyio
import anyio.to_thread

from memstrata import Scope
from memstrata.usage import CallScope, attributed, current_scope, usage_purpose, usage_scope


class Facade:
    @attributed
    def sync_call(self, scope: Scope, text: str) -> CallScope | None:
        return current_scope()

    @attributed
    async def async_call(self, scope: Scope, *, text: str = "") -> CallScope | None:
        # A thread the async facade hands work to sees the same scope.
        return await anyio.to_thread.run_sync(current_scope)


def test_the_facade_binds_its_scope_and_keeps_an_outer_purpose_and_job() -> None:
    f = Facade()
    assert current_scope() is None
    got = f.sync_call(Scope("t", "u", "a"), "x")
    assert got == CallScope("t", "u", "a", None, None)
    assert f.sync_call(scope=Scope("t", "v"), text="x") == CallScope("t", "v", "", None, None)
    with usage_scope("t", "u", purpose="extraction", job_id="j1"):
        inner = f.sync_call(Scope("t", "u"), "x")
        with usage_purpose("query"):
            query = current_scope()
    assert inner == CallScope("t", "u", "", "extraction", "j1")
    assert query == CallScope("t", "u", "", "query", "j1")
    assert current_scope() is None  # nothing leaks past the call


def test_the_async_facade_carries_the_scope_into_threads_and_concurrent_calls_stay_apart() -> None:
    f = Facade()
    seen: dict[str, CallScope | None] = {}

    async def one(user: str) -> None:
        seen[user] = await f.async_call(Scope("t", user))

    async def main() -> None:
        async with anyio.create_task_group() as tg:
            for user in ("u1", "u2", "u3"):
                tg.start_soon(one, user)

    anyio.run(main)
    assert {u: s.user if s else None for u, s in seen.items()} == {u: u for u in ("u1", "u2", "u3")}
