"""The blob store port, the same checks on the memory, file and S3 (moto) stores."""

from __future__ import annotations

import anyio
import pytest

from memstrata.blobs import Blobs, Delete, Get, IfMatch, List, Put
from memstrata.errors import ConfigurationError, InvalidInput, NotFound, PreconditionFailed


def test_put_get_overwrite(blob_store):
    etag = blob_store.put("a/one", b"first")
    got = blob_store.get("a/one")
    assert got.data == b"first"
    assert got.etag == etag
    blob_store.put("a/one", b"second")
    assert blob_store.get("a/one").data == b"second"


def test_create_if_absent_refuses_an_existing_key(blob_store):
    blob_store.put("k/x", b"one", "create")
    with pytest.raises(PreconditionFailed):
        blob_store.put("k/x", b"two", "create")
    assert blob_store.get("k/x").data == b"one"


def test_if_match_where_the_store_has_it(blob_store):
    etag = blob_store.put("m/x", b"v1")
    if not blob_store.capabilities.if_match:
        with pytest.raises(ConfigurationError):
            blob_store.put("m/x", b"v2", IfMatch(etag or "x"))
        return
    assert etag is not None
    new = blob_store.put("m/x", b"v2", IfMatch(etag))
    assert blob_store.get("m/x").data == b"v2"
    with pytest.raises(PreconditionFailed):
        blob_store.put("m/x", b"v3", IfMatch(etag))  # stale
    assert blob_store.get("m/x").data == b"v2"
    assert new != etag


def test_list_by_prefix_and_delete(blob_store):
    for key in ("p/a/1", "p/a/2", "p/b/1", "q/1"):
        blob_store.put(key, key.encode())
    assert sorted(m.key for m in blob_store.list_prefix("p/a/")) == ["p/a/1", "p/a/2"]
    sizes = {m.key: m.size for m in blob_store.list_prefix("p/")}
    assert sizes == {"p/a/1": 5, "p/a/2": 5, "p/b/1": 5}
    assert blob_store.list_prefix("nothing/") == []
    blob_store.delete(["p/a/1", "p/a/never-there"])  # idempotent
    assert sorted(m.key for m in blob_store.list_prefix("p/")) == ["p/a/2", "p/b/1"]
    with pytest.raises(NotFound):
        blob_store.get("p/a/1")


@pytest.mark.parametrize("key", ["../x", "a/../b", "/abs", "a//b", "a/./b", "nul\x00", ""])
def test_keys_that_leave_their_folder_are_refused(blob_store, key):
    with pytest.raises(InvalidInput):
        blob_store.put(key, b"x")


def test_async_calls_and_the_runner_count_bytes(blob_store):
    blobs = Blobs(blob_store)

    def op():
        yield Put("r/1", b"12345", "create")
        try:
            yield Put("r/1", b"67890", "create")
        except PreconditionFailed:
            lost = True
        got = yield Get("r/1")
        listed = yield List("r/")
        yield Delete(("r/1",))
        return lost, got.data, [m.key for m in listed]

    assert blobs.run(op()) == (True, b"12345", ["r/1"])
    assert blobs.counters() == (4, 5, 5)  # the refused put is not counted

    async def main():
        return await blobs.arun(op())

    assert anyio.run(main) == (True, b"12345", ["r/1"])
    assert blobs.counters() == (8, 10, 10)
