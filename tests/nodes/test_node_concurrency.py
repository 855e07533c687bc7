"""8 processes add 100 turns each to one node memory at once, flushing every turn, while
their worker threads compact: every turn is there exactly once, on files and on S3."""

from __future__ import annotations

import os
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

from memstrata import Memory, Scope
from memstrata.nodes.service import blobs_for

PROCESSES = 8
TURNS = 100

WRITER = """
import sys
from memstrata import Memory, Scope
from memstrata.ids import UUID_NIL
db, blobs, cid, who = sys.argv[1:5]
mem = Memory.open(db, blobs=blobs)
node = mem.nodes.open(Scope("t1", "alice"), "app", cid, "shared-node")
for i in range(int(sys.argv[5])):
    node.add_turn(f"{who}-{i}", UUID_NIL, f"turn {i} of {who}", assistant_content="ok")
    node.flush()
mem.close()
"""


def _run(tmp_path: Path, blobs: str, env: dict[str, str]) -> None:
    db = f"sqlite:///{(tmp_path / 'c.db').as_posix()}"
    mem = Memory.open(db, blobs=blobs, settings=None)
    scope = Scope("t1", "alice")
    cid = mem.conversations.create(scope).id
    mem.close()
    full_env = {**os.environ, **env, "MEMSTRATA_WORKER": "thread", "MEMSTRATA_HOME": str(tmp_path)}
    procs = [
        subprocess.Popen(
            [sys.executable, "-c", WRITER, db, blobs, cid, f"p{k}", str(TURNS)],
            env=full_env,
            stderr=subprocess.PIPE,
        )
        for k in range(PROCESSES)
    ]
    for p in procs:
        _, err = p.communicate(timeout=300)
        assert p.returncode == 0, err.decode()[-3000:]

    os.environ.update(env)
    try:
        mem = Memory.open(db, blobs=blobs)
    finally:
        for k in env:
            os.environ.pop(k, None)
    try:

        def ids() -> Counter[str]:
            h = mem.nodes.history(
                scope, "app", cid, "shared-node", max_tokens=None, max_messages=10_000
            )
            return Counter(t.turn.message_id for t in h.turns)

        want = {f"p{k}-{i}" for k in range(PROCESSES) for i in range(TURNS)}
        got = ids()
        assert set(got) == want
        assert set(got.values()) == {1}
        # The worker threads compacted while the writers wrote (the race under test).
        store = blobs_for(mem.core).store
        assert any("/ckpt/" in m.key for m in store.list_prefix("node_memory/"))
        # Fold whatever is still loose and count again.
        mem.nodes.open(scope, "app", cid, "shared-node").compact()
        got = ids()
        assert set(got) == want
        assert set(got.values()) == {1}
    finally:
        mem.close()


@pytest.mark.slow
def test_eight_processes_on_local_files(tmp_path):
    _run(tmp_path, f"file://{(tmp_path / 'blobs').as_posix()}", {})


@pytest.mark.slow
def test_eight_processes_on_s3(tmp_path, s3_server):
    env = {
        "MEMSTRATA_S3_ENDPOINT": s3_server.endpoint,
        "MEMSTRATA_S3_ACCESS_KEY_ID": "test",
        "MEMSTRATA_S3_SECRET_ACCESS_KEY": "test",
    }
    _run(tmp_path, f"s3://{s3_server.bucket()}/conc", env)
