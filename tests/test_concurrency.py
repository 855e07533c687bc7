"""Several processes writing one conversation, one working memory and one plan: nothing lost,
every parent link valid, every compare-and-set update kept."""

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
    for parent, message in itertools.pairwise(branch):
        assert message.parent_id == parent.id
        assert message.depth == parent.depth + 1
        assert message.branch_tokens == parent.branch_tokens + message.token_count
    for k in range(PROCESSES):  # each writer's own messages kept their order
        mine = [c for c in contents if c.startswith(f"p{k}-")]
        assert mine == [f"p{k}-{i}" for i in range(PER_PROCESS)]
    leaves = mem.messages.leaves(SCOPE, conv.id, limit=10).items
    assert [m.id for m in leaves] == [branch[-1].id]
    assert mem.conversations.get(SCOPE, conv.id).message_count == PROCESSES * PER_PROCESS


# Read-modify-write with compare-and-set, the way a client keeps a shared document: each
# writer adds its own lines; on a stale version it reads again and retries.
_CAS_CHILD = """
import sys
from memstrata import Memory, Scope
from memstrata.config import Settings
from memstrata.errors import PreconditionFailed
url, home, cid, who, n = sys.argv[1], sys.argv[2], sys.argv[3], sys.argv[4], int(sys.argv[5])
mem = Memory.open(url, settings=Settings(home=home, worker="off"))
scope = Scope("acme", "writer")
conflicts = 0
for i in range(n):
    while True:
        wm = mem.working.get(scope)
        plan = mem.plans.get(scope, cid)
        try:
            mem.working.put(scope, wm.content + f"{who}-{i}\\n", expected_version=wm.version)
        except PreconditionFailed:
            conflicts += 1
            continue
        break
    while True:
        plan = mem.plans.get(scope, cid)
        steps = [*plan.document["steps"], f"{who}-{i}"]
        try:
            mem.plans.put(scope, cid, {"steps": steps}, expected_version=plan.version)
        except PreconditionFailed:
            conflicts += 1
            continue
        break
print(conflicts)
mem.close()
"""
CAS_PER_PROCESS = 25


@pytest.mark.slow
def test_parallel_compare_and_set_writers_lose_no_update(mem: Memory, tmp_path: Path) -> None:
    conv = mem.conversations.create(SCOPE)
    mem.working.put(SCOPE, "")
    mem.plans.put(SCOPE, conv.id, {"steps": []})
    url = _url(mem, tmp_path)
    children = [
        subprocess.Popen(
            [
                sys.executable,
                "-c",
                _CAS_CHILD,
                url,
                str(tmp_path),
                conv.id,
                f"p{k}",
                str(CAS_PER_PROCESS),
            ],
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
        )
        for k in range(PROCESSES)
    ]
    conflicts = 0
    for child in children:
        out, err = child.communicate(timeout=300)
        assert child.returncode == 0, err
        conflicts += int(out)
    print(f"{conflicts} stale versions refused and retried")
    expected = sorted(f"p{k}-{i}" for k in range(PROCESSES) for i in range(CAS_PER_PROCESS))
    wm = mem.working.get(SCOPE)
    lines = wm.content.splitlines()
    assert sorted(lines) == expected  # every writer's every line, none twice
    assert wm.version == 1 + len(expected)  # one version per successful write, no blind one
    plan = mem.plans.get(SCOPE, conv.id)
    assert sorted(plan.document["steps"]) == expected
    assert plan.version == 1 + len(expected)
    for k in range(PROCESSES):  # each writer's own updates kept their order
        assert [s for s in lines if s.startswith(f"p{k}-")] == [
            f"p{k}-{i}" for i in range(CAS_PER_PROCESS)
        ]
