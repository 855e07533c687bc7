"""Finding 2 of issue 21: a conversation or user delete racing writes under it.

Each round starts 30 writes (appends and every kind of state write under the
conversation) and one delete at once, then scans every column of every table for
the deleted owner's ids and for the canary its writes carried: nothing may be
left. A write that loses the race must fail with NotFound, never another error.
"""

from __future__ import annotations

import random
import secrets
import threading
from collections.abc import Callable, Iterator
from concurrent.futures import ThreadPoolExecutor
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from memstrata import Memory, Scope
from memstrata.errors import NotFound
from memstrata.storage.plan import Op, Query, read
from support import open_memory

ROUNDS = 10
WRITES = 30
TENANT = "race"


@pytest.fixture(params=["sqlite-file", "postgres"])
def mem(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    # Enough connections that the writes and the delete really run side by side.
    yield from open_memory(request.param, tmp_path, pool=16)


# -- the scan --------------------------------------------------------------------------------

# Tables that may keep an id on purpose after a delete: deletion receipts name what they
# deleted (ids, never content; tests/receipts searches them for the canary).
KEEPS_IDS: frozenset[str] = frozenset({"schema_migrations", "deletion_receipts"})


def _columns(mem: Memory) -> list[tuple[str, str]]:
    """Every (table, column) of the store, read from the catalogue."""

    def op() -> Op[list[tuple[str, str]]]:
        if mem.core.engine.dialect == "postgres":
            rows = yield Query(
                "SELECT table_name, column_name FROM information_schema.columns "
                "WHERE table_schema = current_schema() ORDER BY table_name, ordinal_position"
            )
            return [(r[0], r[1]) for r in rows]
        tables = yield Query(
            "SELECT name FROM sqlite_master WHERE type = 'table' AND name NOT LIKE 'sqlite_%'"
        )
        out: list[tuple[str, str]] = []
        for (table,) in tables:
            cols = yield Query(f"SELECT name FROM pragma_table_info('{table}')")
            out += [(table, c[0]) for c in cols]
        return out

    return mem.core.engine.run(read(op))


def leftovers(mem: Memory, needles: list[str]) -> list[str]:
    """``table.column ~ needle: n rows`` for every column holding any needle."""
    columns = [(t, c) for t, c in _columns(mem) if t not in KEEPS_IDS]
    assert len({t for t, _ in columns}) > 20, "the scan must see the whole schema"

    def op() -> Op[list[str]]:
        found: list[str] = []
        for table, column in columns:
            for needle in needles:
                rows = yield Query(
                    f'SELECT count(*) FROM "{table}" WHERE CAST("{column}" AS TEXT) LIKE ?',
                    (f"%{needle}%",),
                )
                if rows[0][0]:
                    found.append(f"{table}.{column} ~ {needle}: {rows[0][0]} rows")
        return found

    return mem.core.engine.run(read(op))


# -- the writes ------------------------------------------------------------------------------


def _writes(mem: Memory, scope: Scope, cid: str, canary: str) -> list[Callable[[], Any]]:
    """WRITES writes under ``cid``: half appends, half the state writes in turn."""

    def append(i: int) -> Callable[[], Any]:
        return lambda: mem.messages.append(scope, cid, role="user", content=f"{canary} m{i}")

    state: list[Callable[[int], Callable[[], Any]]] = [
        lambda i: lambda: mem.plans.put(scope, cid, {"step": f"{canary} {i}"}),
        lambda i: (
            lambda: mem.iterations.append(
                scope, cid, "task", outcome="failed", error=f"{canary} {i}"
            )
        ),
        lambda i: lambda: mem.snapshots.put(scope, cid, f"run{i}", {"ui": f"{canary} {i}"}),
        lambda i: (
            lambda: mem.checkpoints.save(
                scope, "graph", f"run{i}", {"s": f"{canary} {i}"}, conversation_id=cid
            )
        ),
        lambda i: lambda: mem.working.put(scope, f"{canary} {i}", conversation_id=cid),
    ]
    return [append(i) if i % 2 == 0 else state[(i // 2) % len(state)](i) for i in range(WRITES)]


def _race(writes: list[Callable[[], Any]], delete: Callable[[], Any]) -> list[str]:
    """Run the writes and the delete at once; the outcome of each write."""
    start = threading.Barrier(len(writes) + 1)
    pause = random.uniform(0, 0.02)

    def write(fn: Callable[[], Any]) -> str:
        start.wait()
        try:
            fn()
        except NotFound:
            return "not found"
        return "ok"

    def delete_soon() -> None:
        start.wait()
        threading.Event().wait(pause)  # somewhere in the middle of the writes
        delete()

    with ThreadPoolExecutor(len(writes) + 1) as pool:
        done = [pool.submit(write, fn) for fn in writes]
        deleted = pool.submit(delete_soon)
        deleted.result()
        return [f.result() for f in done]  # any error but NotFound fails the test here


def test_conversation_delete_racing_writes_leaves_nothing(mem: Memory) -> None:
    outcomes: list[str] = []
    for n in range(ROUNDS):
        scope = Scope(TENANT, f"owner{n}")
        conv = mem.conversations.create(scope, title="kept user, deleted conversation")
        canary = f"canary-{secrets.token_hex(6)}"
        mem.messages.append(scope, conv.id, role="user", content=f"{canary} first")
        outcomes += _race(
            _writes(mem, scope, conv.id, canary),
            partial(mem.conversations.delete, scope, conv.id),
        )
        assert leftovers(mem, [conv.id, canary]) == []
        with pytest.raises(NotFound):
            mem.conversations.get(scope, conv.id)
    assert "ok" in outcomes  # the writes did run


def test_user_delete_racing_writes_leaves_nothing(mem: Memory) -> None:
    outcomes: list[str] = []
    for n in range(ROUNDS):
        user = f"victim{n}-{secrets.token_hex(4)}"
        scope = Scope(TENANT, user)
        first = mem.conversations.create(scope)
        second = mem.conversations.create(scope)
        canary = f"canary-{secrets.token_hex(6)}"
        mem.working.put(scope, f"{canary} user-wide")
        mem.checkpoints.save(scope, "graph", "user-wide", {"s": canary})
        writes = _writes(mem, scope, first.id, canary)[: WRITES // 2]
        writes += _writes(mem, scope, second.id, canary)[: WRITES - len(writes)]
        outcomes += _race(writes, partial(mem.users.delete, scope))
        assert leftovers(mem, [user, first.id, second.id, canary]) == []
    assert "ok" in outcomes


def test_user_delete_racing_fact_writes_never_deadlocks(mem: Memory) -> None:
    """Long-term writes lock the user before the owner's memory row, as the delete does:
    each write either lands before the delete (and goes with it) or after (a new user)."""
    for n in range(ROUNDS):
        scope = Scope(TENANT, f"facts{n}")
        mem.facts.add(scope, "lives in Lisbon")
        writes: list[Callable[[], Any]] = [
            partial(mem.facts.add, scope, f"fact number {i}") for i in range(WRITES)
        ]
        assert set(_race(writes, partial(mem.users.delete, scope))) == {"ok"}
        kept = {f.content for f in mem.facts.list(scope, limit=100).items}
        assert "lives in Lisbon" not in kept  # the delete took everything before it
