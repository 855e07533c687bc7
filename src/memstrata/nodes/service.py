"""Wiring of node memory into an opened memory: its blob store and its background jobs."""

from __future__ import annotations

import threading
import weakref
from typing import TYPE_CHECKING, Any, TypeVar

from memstrata.blobs import BlobOp, Blobs, BlobStore
from memstrata.nodes import log
from memstrata.nodes import ops as nodes_ops
from memstrata.nodes.layout import NodeKey
from memstrata.nodes.sealed import sealed
from memstrata.storage.plan import write

if TYPE_CHECKING:
    from memstrata.api._sync import Memory
    from memstrata.api.core import Core
    from memstrata.jobs.ops import Job

__all__ = ["COMPACT_AFTER", "blobs_for", "compact_job", "owned", "purge_job", "use_blob_store"]

T = TypeVar("T")

#: Loose segments that make a compaction worth queueing.
COMPACT_AFTER = 8

_stores: weakref.WeakKeyDictionary[Any, Blobs] = weakref.WeakKeyDictionary()
_lock = threading.Lock()


def blobs_for(core: Core) -> Blobs:
    """The blob store of ``core`` (opened at first use from ``blobs=`` or settings)."""
    with _lock:
        blobs = _stores.get(core)
        if blobs is None:
            blobs = _stores[core] = Blobs(core.open_blob_store())
        return blobs


def use_blob_store(core: Core, store: BlobStore) -> Blobs:
    """Put ``store`` behind ``core`` (tests wrap a store to inject faults)."""
    with _lock:
        blobs = _stores[core] = Blobs(store)
        return blobs


def owned(core: Core, op: BlobOp[T], tenant: str, user: str) -> BlobOp[T]:
    """``op`` on the objects of a node memory of ``(tenant, user)``: sealed for them under
    encryption at rest (:mod:`memstrata.nodes.sealed`)."""
    return sealed(op, core.sealer, tenant, user)


def purge_job(job: Job, memory: Memory) -> None:
    """Delete the objects of a node memory generation that the index no longer names."""
    prefix = str(job.payload["prefix"])
    blobs_for(memory.core).run(log.purge(prefix))


def compact_job(job: Job, memory: Memory) -> None:
    core = memory.core
    p = job.payload
    key = NodeKey(p["tenant"], p["app_id"], p["conversation_id"], p["node_id"])
    gen = str(p["generation"])
    if job.user is None:  # every compaction is queued with its user; the key needs one
        return
    compacting = owned(core, log.compact(key.prefix(gen), min_segments=2), key.tenant, job.user)
    absorbed = blobs_for(core).run(compacting)
    if absorbed:
        core.engine.run(write(lambda: nodes_ops.compacted(key, gen, absorbed)))
