"""Opening a branch in one statement: the owner check, the leaf and its system run.

``open_branch`` must answer exactly what the step-by-step reads answer (the conversation,
then the leaf, then the system run), including which NotFound comes first, and a history
whose budget fits the first walk chunk reads with one statement (two without reading ahead). SQLite and PostgreSQL
(the PostgreSQL cases skip without a server, see tests/support.py).
"""

from __future__ import annotations

import uuid
from collections.abc import Callable, Iterator
from functools import partial
from pathlib import Path
from typing import Any

import pytest

from memstrata import Memory, Scope
from memstrata.conversation.branch import (
    Leaf,
    history,
    load_leaf,
    open_branch,
    resolve_leaf,
    system_run,
)
from memstrata.conversation.conversations import get_conversation
from memstrata.errors import NotFound
from memstrata.storage.plan import Op, Request, read
from memstrata.types import Message
from support import open_memory

ALICE = Scope("t1", "alice")
MALLORY = Scope("t1", "mallory")


@pytest.fixture(params=["sqlite-memory", "postgres"])
def mem(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    yield from open_memory(request.param, tmp_path)


def _stepwise(scope: Scope, cid: str, leaf_id: str | None) -> Op[tuple[Leaf, list[Message]] | None]:
    conv = yield from get_conversation(scope, cid)
    ref = leaf_id or conv.active_leaf_id
    if ref is None:
        return None
    leaf = yield from load_leaf(cid, ref)
    return leaf, (yield from system_run(cid, leaf))


def _outcome(mem: Memory, op: Callable[..., Op[Any]], *args: Any) -> Any:
    try:
        return mem.core.engine.run(read(partial(op, *args)))
    except NotFound as exc:
        return ("NotFound", exc.detail, str(exc))


def _seed(mem: Memory, systems: int) -> tuple[str, list[str]]:
    cid = mem.conversations.create(ALICE).id
    ids = [
        mem.messages.append(ALICE, cid, role="system", content=f"s{i}").id for i in range(systems)
    ]
    for i in range(4):
        ids.append(mem.messages.append(ALICE, cid, role="user", content=f"q{i}").id)
        ids.append(mem.messages.append(ALICE, cid, role="assistant", content=f"a{i}").id)
    return cid, ids


@pytest.mark.parametrize("systems", [0, 1, 3])
def test_open_branch_answers_as_the_stepwise_reads(mem: Memory, systems: int) -> None:
    cid, ids = _seed(mem, systems)
    empty = mem.conversations.create(ALICE).id
    cases: list[tuple[Scope, str, str | None]] = [
        (ALICE, cid, None),
        (ALICE, cid, ""),
        (ALICE, cid, ids[-3]),
        (ALICE, cid, ids[0]),  # a leaf inside the system run
        (ALICE, cid, ids[-1].upper()),
        (ALICE, cid, str(uuid.uuid4())),  # no such message
        (ALICE, cid, "not-an-id"),
        (ALICE, empty, None),
        (ALICE, empty, ids[-1]),  # another conversation's message
        (MALLORY, cid, None),
        (MALLORY, cid, "not-an-id"),  # the conversation's NotFound comes first
        (ALICE, str(uuid.uuid4()), ids[-1]),
    ]
    for scope, conv, leaf_id in cases:
        want = _outcome(mem, _stepwise, scope, conv, leaf_id)
        got = _outcome(mem, open_branch, scope, conv, leaf_id)
        assert got == want, (scope, conv, leaf_id)
        only_leaf = _outcome(mem, resolve_leaf, scope, conv, leaf_id)
        if want is None or want[0] == "NotFound":
            assert only_leaf == want
        else:
            leaf, system = want
            assert only_leaf == leaf
            assert len(system) == min(systems, leaf.message.depth + 1)
            assert all(m.role.value == "system" for m in system)


@pytest.mark.parametrize(("read_ahead", "statements"), [(True, 1), (False, 2)])
def test_history_in_one_budget_reads_with_one_statement(
    mem: Memory, read_ahead: bool, statements: int
) -> None:
    cid, _ = _seed(mem, 2)
    sent: list[Request] = []

    def counted() -> Op[Any]:
        op = history(mem.core.rt, ALICE, cid, max_tokens=2000, read_ahead=read_ahead)
        result = None
        try:
            while True:
                request = op.send(result)
                sent.append(request)
                result = yield request
        except StopIteration as stop:
            return stop.value

    h = mem.core.engine.run(read(counted))
    assert [m.content for m in h.messages] == ["s0", "s1"] + [
        c for i in range(4) for c in (f"q{i}", f"a{i}")
    ]
    assert len(sent) == statements
    assert h == mem.history(ALICE, cid, max_tokens=2000)
