"""Conformance tests for graph storage, ``mem.graphs`` (every backend runs them):
checkpoints and pending writes of a checkpointer, and the items of a graph store."""

from __future__ import annotations

import secrets

import pytest

from memstrata import Memory
from memstrata.errors import InvalidInput
from memstrata.graph.checkpoints import GraphWrite
from memstrata.testing.conformance.helpers import fresh_scope
from memstrata.types import Scope

__all__ = ["GraphConformance"]


def _put(
    memory: Memory,
    scope: Scope,
    thread: str,
    cid: str,
    parent: str | None = None,
    ns: str = "",
    run: str | None = None,
) -> None:
    memory.graphs.put_checkpoint(
        scope,
        thread_id=thread,
        checkpoint_ns=ns,
        checkpoint_id=cid,
        parent_id=parent,
        run_id=run,
        type="msgpack",
        checkpoint=b"\x00\xffstate-" + cid.encode(),
        metadata_type="json",
        metadata=b'{"step": 1}',
    )


def _ids(memory: Memory, scope: Scope, **kwargs: object) -> list[str]:
    page = memory.graphs.list_checkpoints(scope, **kwargs)  # type: ignore[arg-type]
    return [c.checkpoint_id for c in page.items]


class GraphConformance:
    def test_checkpoints_round_trip_bytes_and_order_newest_first(self, memory: Memory) -> None:
        scope = fresh_scope()
        for cid, parent in (("c1", None), ("c2", "c1"), ("c3", "c2"), ("c2b", "c1")):
            _put(memory, scope, "any thread/ä", cid, parent)
        latest = memory.graphs.get_checkpoint(scope, "any thread/ä")
        assert latest is not None
        assert (latest.checkpoint_id, latest.parent_id) == ("c3", "c2")
        assert latest.checkpoint == b"\x00\xffstate-c3"
        fork = memory.graphs.get_checkpoint(scope, "any thread/ä", "", "c2b")
        assert fork is not None
        assert fork.parent_id == "c1"
        assert _ids(memory, scope, thread_id="any thread/ä") == ["c3", "c2b", "c2", "c1"]
        assert _ids(memory, scope, thread_id="any thread/ä", before="c2b") == ["c2", "c1"]
        assert memory.graphs.get_checkpoint(scope, "other") is None
        assert memory.graphs.get_checkpoint(fresh_scope(), "any thread/ä") is None

    def test_listing_pages_across_threads_and_namespaces(self, memory: Memory) -> None:
        scope = fresh_scope()
        for thread in ("a", "b"):
            for ns in ("", "child"):
                for cid in ("1", "2", "3"):
                    _put(memory, scope, thread, cid, ns=ns)
        seen: list[tuple[str, str, str]] = []
        cursor = None
        while True:
            page = memory.graphs.list_checkpoints(scope, limit=5, cursor=cursor)
            seen += [(c.thread_id, c.checkpoint_ns, c.checkpoint_id) for c in page.items]
            if page.next_cursor is None:
                break
            cursor = page.next_cursor
        assert seen == [(t, ns, c) for t in "ab" for ns in ("", "child") for c in "321"]
        assert _ids(memory, scope, thread_id="a", checkpoint_ns="child", limit=2) == ["3", "2"]
        with pytest.raises(InvalidInput):
            memory.graphs.list_checkpoints(scope, cursor="not-a-cursor")

    def test_pending_writes_keep_the_first_regular_and_the_last_special(
        self, memory: Memory
    ) -> None:
        scope = fresh_scope()
        _put(memory, scope, "t", "c1")

        def write(task: str, idx: int, value: bytes, path: str = "") -> None:
            memory.graphs.put_writes(
                scope,
                thread_id="t",
                checkpoint_ns="",
                checkpoint_id="c1",
                writes=[GraphWrite(task, idx, "ch", "bytes", value, path)],
            )

        write("task-b", 0, b"first", "~b")
        write("task-b", 0, b"retried")  # a regular write replayed: the first stays
        write("task-a", -1, b"error 1", "~a")
        write("task-a", -1, b"error 2", "~a")  # a special write: the last wins
        found = memory.graphs.get_checkpoint(scope, "t")
        assert found is not None
        assert [(w.task_id, w.idx, w.value) for w in found.writes] == [
            ("task-a", -1, b"error 2"),
            ("task-b", 0, b"first"),
        ]

    def test_delete_copy_prune_and_runs(self, memory: Memory) -> None:
        scope = fresh_scope()
        for cid in ("1", "2", "3"):
            _put(memory, scope, "src", cid, run=f"run-{cid}")
        _put(memory, scope, "src", "9", ns="child")
        memory.graphs.copy_thread(scope, "src", "dst")
        assert _ids(memory, scope, thread_id="dst") == ["3", "2", "1", "9"]
        memory.graphs.delete_runs(scope, ["run-2"])  # in every thread: the copy too
        assert _ids(memory, scope, thread_id="src") == ["3", "1", "9"]
        memory.graphs.prune(scope, ["src"], strategy="keep_latest")
        assert _ids(memory, scope, thread_id="src") == ["3", "9"]
        memory.graphs.delete_thread(scope, "src")
        assert _ids(memory, scope, thread_id="src") == []
        assert _ids(memory, scope, thread_id="dst") == ["3", "1", "9"]
        with pytest.raises(InvalidInput):
            memory.graphs.prune(scope, ["dst"], strategy="everything")  # type: ignore[arg-type]

    def test_deleting_a_user_deletes_their_checkpoints(self, memory: Memory) -> None:
        scope, other = fresh_scope(), fresh_scope()
        _put(memory, scope, "t", "1")
        _put(memory, other, "t", "1")
        memory.users.delete(scope)
        assert memory.graphs.get_checkpoint(scope, "t") is None
        assert memory.graphs.get_checkpoint(other, "t") is not None

    def test_items_round_trip_by_namespace_prefix(self, memory: Memory) -> None:
        tenant = f"t{secrets.token_hex(4)}"
        memory.graphs.put_item(tenant, ("memories", "u1"), "k 1", {"text": "tea", "n": [1]})
        memory.graphs.put_item(tenant, ("memories", "u10"), "k", {"text": "coffee"})
        memory.graphs.put_item(tenant, ("memories",), "top", {"text": "root"})
        memory.graphs.put_item(tenant, ("memories", "u1"), "k", {"v": 1}, vectors={"$": [0.5, -1]})
        got = memory.graphs.get_items(tenant, [(("memories", "u1"), "k 1"), (("x",), "y")])
        assert got[0] is not None
        assert got[0].value == {"text": "tea", "n": [1]}
        assert got[1] is None
        under = memory.graphs.search_items(tenant, ("memories", "u1"), with_vectors=True)
        assert sorted(i.key for i in under) == ["k", "k 1"]  # not u10's
        assert next(i for i in under if i.key == "k").vectors == {"$": [0.5, -1.0]}
        assert len(memory.graphs.search_items(tenant, ("memories",))) == 4
        assert memory.graphs.list_namespaces(tenant) == [
            ("memories",),
            ("memories", "u1"),
            ("memories", "u10"),
        ]
        assert memory.graphs.list_namespaces(tenant, agent="planner") == []
        memory.graphs.delete_item(tenant, ("memories", "u1"), "k 1")
        assert memory.graphs.get_items(tenant, [(("memories", "u1"), "k 1")]) == [None]
        for bad in ((), ("a.b",), ("",)):
            with pytest.raises(InvalidInput):
                memory.graphs.put_item(tenant, bad, "k", {"v": 1})
        with pytest.raises(InvalidInput):
            memory.graphs.put_item(tenant, ("a",), "k", {"v": float("nan")} | {"x": object()})

    def test_items_expire_and_reads_can_push_them_back(self, memory: Memory) -> None:
        tenant = f"t{secrets.token_hex(4)}"
        rt = memory.admin.runtime
        start = rt.clock()
        clock = [start]
        real = rt.clock
        rt.clock = lambda: clock[0]
        try:
            memory.graphs.put_item(tenant, ("s",), "k", {"v": 1}, ttl_s=60)
            clock[0] = start + 50_000_000
            memory.graphs.get_items(tenant, [(("s",), "k")], refresh_ttl=True)
            clock[0] = start + 100_000_000  # past the first expiry, not the pushed one
            assert memory.graphs.get_items(tenant, [(("s",), "k")]) != [None]
            clock[0] = start + 111_000_000
            assert memory.graphs.get_items(tenant, [(("s",), "k")]) == [None]
            assert memory.graphs.list_namespaces(tenant) == []
            memory.graphs.put_item(tenant, ("s",), "other", {"v": 2})  # sweeps the expired
            assert [i.key for i in memory.graphs.search_items(tenant)] == ["other"]
        finally:
            rt.clock = real
