"""Several processes appending to one conversation: nothing lost, every parent link valid."""

from __future__ import annotations

import itertools
import subprocess
import sys
from collections.abc import Iterator
from pathlib import Path

import pytest

from memstrata import Memory, Scope
from support import open_memory, postgres_url_for

SCOPE = Scope("acme", "writer")
PROCESSES = 4
PER_PROCESS = 60

_CHILD = """
import sys
from memstrata import Memory, Scope
from memstrata.config import Settings
url, home, cid, who, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
mem = Memory.open(url, settings=Settings(home=home, worker="off"))
scope = Scope("acme", "writer")
for i in range(n):
    role = "user" if i % 2 == 0 else "assistant"
    mem.messages.append(scope, cid, role=role, content=f"{who}-{i}")
mem.close()
"""


@pytest.fixture(params=["sqlite-file", "postgres"])
def mem(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Memory]:
    yield from open_memory(request.param, tmp_path)


def _url(mem: Memory, tmp_path: Path) -> str:
    engine = mem.core.engine
    if engine.dialect == "postgres":
        return postgres_url_for(engine._kwargs["options"].split("=", 1)[1])  # type: ignore[attr-defined]
    return f"sqlite:///{tmp_path / 'memstrata.db'}"


@pytest.mark.slow
def test_parallel_appenders_lose_nothing(mem: Memory, tmp_path: Path) -> None:
    conv = mem.conversations.create(SCOPE)
    url = _url(mem, tmp_path)
    children = [
        subprocess.Popen(
            [sys.executable, "-c", _CHILD, url, str(tmp_path), conv.id, f"p{k}", str(PER_PROCESS)],
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(PROCESSES)
    ]
    for child in children:
        _, err = child.communicate(timeout=300)
        assert child.returncode == 0, err
    # Every append went after the active leaf under the conversation's row lock, so the
    # whole stream is one linear branch: walk it from the active leaf.
    branch = mem.messages.path(SCOPE, conv.id)
    contents = [m.content for m in branch]
    assert len(contents) == PROCESSES * PER_PROCESS
    assert sorted(contents) == sorted(
        f"p{k}-{i}" for k in range(PROCESSES) for i in range(PER_PROCESS)
    )
    for parent, child in itertools.pairwise(branch):
        assert child.parent_id == parent.id
        assert child.depth == parent.depth + 1
        assert child.branch_tokens == parent.branch_tokens + child.token_count
    for k in range(PROCESSES):  # each writer's own messages kept their order
        mine = [c for c in contents if c.startswith(f"p{k}-")]
        assert mine == [f"p{k}-{i}" for i in range(PER_PROCESS)]
    leaves = mem.messages.leaves(SCOPE, conv.id, limit=10).items
    assert [m.id for m in leaves] == [branch[-1].id]
    assert mem.conversations.get(SCOPE, conv.id).message_count == PROCESSES * PER_PROCESS
