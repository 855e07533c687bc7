"""Deleting a conversation's messages erases the node-memory turns recorded under their ids
(Dify keys a node's turns by the conversation's message id), on every backend: the
receipt verifies, no object holds their words, and the other turns read as before.

A blob store that is down at the deletion leaves the turns to the ``nodes.erase`` job,
and the receipt says so until it has run."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from pathlib import Path

from memstrata import Memory, Scope
from memstrata.blobs import Blob, BlobMeta, BlobStore, PutMode
from memstrata.errors import BackendUnavailable
from memstrata.nodes.layout import ROOT
from memstrata.nodes.ops import ERASE_JOB
from memstrata.nodes.service import blobs_for, use_blob_store
from memstrata.sealing import is_sealed
from memstrata.storage.plan import Exec, Op, Query, read, write
from support import node_objects_holding, sealed_settings

SCOPE = Scope("erase", "dana")


def _turn_ids(mem: Memory, cid: str) -> list[tuple[str, str, int]]:
    def op() -> Op[list[tuple[str, str, int]]]:
        rows = yield Query(
            "SELECT node_id, message_id, erasing FROM node_turn_ids WHERE conversation_id = ? "
            "ORDER BY node_id, message_id",
            (cid,),
        )
        return [(str(n), str(m), int(e)) for n, m, e in rows]

    return mem.core.engine.run(read(op))


class _Plant:
    """A conversation of three turns (q1 → q2 → q3) whose node ``llm`` stored a turn of
    each, partly compacted into a chunk, q2's turn replaced once (two revisions); node
    ``tool`` stored one of q2. ``secret`` is said only in q2's and q3's turns."""

    def __init__(self, mem: Memory, scope: Scope) -> None:
        self.secret = f"SECRET{uuid.uuid4().hex}"
        conv = mem.conversations.create(scope)
        self.cid = conv.id
        ids = []
        parent = None
        for i in range(3):
            q = mem.messages.append(scope, self.cid, role="user", content=f"q{i}", parent_id=parent)
            parent = mem.messages.append(scope, self.cid, role="assistant", content=f"a{i}").id
            ids.append(q.id)
        self.q1, self.q2, self.q3 = ids
        node = mem.nodes.open(scope, "app", self.cid, "llm")
        node.add_turn(self.q1, None, user_content="kept question", assistant_content="kept answer")
        node.flush()
        node.add_turn(self.q2, self.q1, user_content=f"first {self.secret}", assistant_content="x")
        node.flush()
        assert node.compact() == 2  # q1's and q2's first turns now sit in one chunk
        node.add_turn(self.q2, self.q1, user_content=f"again {self.secret}", assistant_content="y")
        node.flush()  # a revision, in a loose segment
        node.add_turn(self.q3, self.q2, user_content=f"third {self.secret}", assistant_content="z")
        node.flush()
        mem.nodes.add_turn(
            scope, "app", self.cid, "tool", message_id=self.q2, user_content=f"tool {self.secret}"
        )


def test_a_deleted_subtree_takes_its_node_turns_with_it(memory: Memory) -> None:
    p = _Plant(memory, SCOPE)
    assert node_objects_holding(memory, p.secret)
    r = memory.messages.delete(SCOPE, p.cid, p.q2)  # q2 and q3 (its subtree)
    assert r.verified is True, r.findings
    assert r.tables["node_turn_ids"] == 3  # llm: q2, q3; tool: q2
    assert node_objects_holding(memory, p.secret) == []
    assert _turn_ids(memory, p.cid) == [("llm", p.q1, 0)]
    llm = memory.nodes.open(SCOPE, "app", p.cid, "llm")
    assert llm.message_log(p.q2) == []
    assert llm.message_log(p.q3) == []
    h = llm.history(p.q1)
    assert [m.content for m in h.messages] == ["kept question", "kept answer"]
    assert memory.nodes.open(SCOPE, "app", p.cid, "tool").history(p.q2).messages == []
    # The node memory goes on: a new turn, a compaction, and history reads all of it.
    llm.add_turn("after", p.q1, user_content="later question", assistant_content="later")
    llm.flush()
    llm.compact()
    assert [m.content for m in llm.history("after").messages] == [
        "kept question",
        "kept answer",
        "later question",
        "later",
    ]
    # The queued job has nothing left to do.
    assert memory.jobs.run_pending([ERASE_JOB]) == 1
    assert _turn_ids(memory, p.cid) == sorted([("llm", p.q1, 0), ("llm", "after", 0)])


def test_a_spliced_message_takes_its_node_turns_and_leaves_its_children(
    memory: Memory,
) -> None:
    p = _Plant(memory, SCOPE)
    r = memory.messages.delete(SCOPE, p.cid, p.q2, mode="splice")
    assert r.verified is True, r.findings
    assert r.tables["node_turn_ids"] == 2  # llm's and tool's turns of q2
    assert _turn_ids(memory, p.cid) == [("llm", p.q1, 0), ("llm", p.q3, 0)]
    left = node_objects_holding(memory, p.secret)
    assert left
    assert all("/llm/" in key for key in left)
    llm = memory.nodes.open(SCOPE, "app", p.cid, "llm")
    assert llm.message_log(p.q2) == []
    assert [t.user_content for t in llm.message_log(p.q3)] == [f"third {p.secret}"]


def _erase_jobs(mem: Memory) -> list[tuple[str, str]]:
    def op() -> Op[list[tuple[str, str]]]:
        rows = yield Query("SELECT id, status FROM jobs WHERE kind = ? ORDER BY id", (ERASE_JOB,))
        return [(str(i), str(s)) for i, s in rows]

    return mem.core.engine.run(read(op))


def _make_due(mem: Memory) -> None:
    def op() -> Op[None]:
        yield Exec("UPDATE jobs SET run_after = 0 WHERE kind = ?", (ERASE_JOB,))

    mem.core.engine.run(write(op))


def test_a_message_without_node_turns_queues_nothing(memory: Memory) -> None:
    p = _Plant(memory, SCOPE)
    other = memory.messages.append(SCOPE, p.cid, role="user", content="no node saw this")
    r = memory.messages.delete(SCOPE, p.cid, other.id)
    assert r.verified is True, r.findings
    assert "node_turn_ids" not in r.tables
    assert _erase_jobs(memory) == []


class _Switch:
    """A blob store that fails every call while ``down``."""

    def __init__(self, inner: BlobStore) -> None:
        self.inner = inner
        self.down = False
        self.url = inner.url
        self.capabilities = inner.capabilities

    def _check(self) -> None:
        if self.down:
            raise BackendUnavailable("blob store down (test)")

    def get(self, key: str) -> Blob:
        self._check()
        return self.inner.get(key)

    def put(self, key: str, data: bytes, mode: PutMode = "overwrite") -> str | None:
        self._check()
        return self.inner.put(key, data, mode)

    def list_prefix(self, prefix: str) -> list[BlobMeta]:
        self._check()
        return self.inner.list_prefix(prefix)

    def delete(self, keys: Sequence[str]) -> None:
        self._check()
        self.inner.delete(keys)

    async def aget(self, key: str) -> Blob:
        return self.get(key)

    async def aput(self, key: str, data: bytes, mode: PutMode = "overwrite") -> str | None:
        return self.put(key, data, mode)

    async def alist_prefix(self, prefix: str) -> list[BlobMeta]:
        return self.list_prefix(prefix)

    async def adelete(self, keys: Sequence[str]) -> None:
        self.delete(keys)


def test_a_store_down_at_the_deletion_leaves_the_turns_to_the_job(memory: Memory) -> None:
    p = _Plant(memory, SCOPE)
    switch = _Switch(blobs_for(memory.core).store)
    use_blob_store(memory.core, switch)
    switch.down = True
    r = memory.messages.delete(SCOPE, p.cid, p.q3)
    assert r.verified is False
    assert any(ERASE_JOB in f for f in r.findings), r.findings
    assert any("node_turn_ids.message_id" in f for f in r.findings), r.findings
    assert ("llm", p.q3, 1) in _turn_ids(memory, p.cid)  # marked, durable
    assert memory.jobs.run_pending([ERASE_JOB]) == 1  # and fails: it is queued again
    ((_, status),) = _erase_jobs(memory)
    assert status == "queued"
    switch.down = False
    # Back, before the job has run: readers already leave the deleted message's turns out.
    llm = memory.nodes.open(SCOPE, "app", p.cid, "llm")
    assert llm.message_log(p.q3) == []
    thread = ["kept question", "kept answer", f"again {p.secret}", "y"]
    assert [m.content for m in llm.history(p.q3).messages] == thread
    assert [m.content for m in llm.history().messages] == thread
    _make_due(memory)
    assert memory.jobs.run_pending([ERASE_JOB]) == 1
    assert [m.content for m in llm.history(p.q3).messages] == thread
    assert _turn_ids(memory, p.cid) == [("llm", p.q1, 0), ("llm", p.q2, 0), ("tool", p.q2, 0)]
    assert llm.message_log(p.q3) == []
    assert [t.user_content for t in llm.message_log(p.q2)] == [
        f"first {p.secret}",
        f"again {p.secret}",
    ]
    again = memory.receipts.verify(SCOPE, r.id)
    assert again.verified is True, again.findings


def test_under_encryption_the_rewrite_is_sealed_for_the_owner(tmp_path: Path) -> None:
    s = sealed_settings(tmp_path)
    with Memory.open(settings=s) as mem:
        p = _Plant(mem, SCOPE)
        r = mem.messages.delete(SCOPE, p.cid, p.q3)
        assert r.verified is True, r.findings
        llm = mem.nodes.open(SCOPE, "app", p.cid, "llm")
        assert llm.message_log(p.q3) == []
        assert [t.user_content for t in llm.message_log(p.q2)] == [
            f"first {p.secret}",
            f"again {p.secret}",
        ]
        h = llm.history(p.q2)
        assert [m.content for m in h.messages][-2:] == [f"again {p.secret}", "y"]
        for meta in blobs_for(mem.core).store.list_prefix(f"{ROOT}/"):
            assert is_sealed(blobs_for(mem.core).store.get(meta.key).data), meta.key
