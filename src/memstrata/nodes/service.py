"""Node memory's per-memory state: its blob store (opened on first use) and the jobs
that purge and compact the generations of node memories."""

from __future__ import annotations

import threading
from collections.abc import Callable
from functools import partial
from typing import TYPE_CHECKING, TypeVar

from memstrata.blobs import BlobOp, Blobs, BlobStore
from memstrata.nodes import log
from memstrata.nodes import ops as nodes_ops
from memstrata.nodes.layout import NodeKey
from memstrata.nodes.ops import Erasure
from memstrata.nodes.sealed import sealed
from memstrata.storage.plan import read, write

if TYPE_CHECKING:
    from memstrata.api.core import Core
    from memstrata.jobs.ops import Job
    from memstrata.sealing import Sealer
    from memstrata.storage.engine import Engine

__all__ = ["COMPACT_AFTER", "NodesKit", "blobs_for", "owned", "use_blob_store"]

T = TypeVar("T")

#: Loose segments that make a compaction worth queueing.
COMPACT_AFTER = 8


class NodesKit:
    """What node memory keeps for one opened memory (the ``nodes`` feature's kit)."""

    def __init__(
        self, engine: Engine, open_store: Callable[[], BlobStore], sealer: Sealer | None = None
    ) -> None:
        self._engine = engine
        self._sealer = sealer
        self._open_store = open_store
        self._blobs: Blobs | None = None
        self._lock = threading.Lock()

    @property
    def blobs(self) -> Blobs:
        """The blob store (opened at first use from ``blobs=`` or the settings)."""
        with self._lock:
            if self._blobs is None:
                self._blobs = Blobs(self._open_store())
            return self._blobs

    def use(self, store: BlobStore) -> Blobs:
        """Put ``store`` behind this memory's node memory (tests wrap a store to inject
        faults)."""
        with self._lock:
            self._blobs = Blobs(store)
            return self._blobs

    def purge_job(self, job: Job, _context: object) -> None:
        """Delete the objects of a node memory generation that the index no longer names."""
        self.blobs.run(log.purge(str(job.payload["prefix"])))

    def _erasing(self, erasure: Erasure) -> BlobOp[tuple[int, int]]:
        """The rewrite of one node memory, sealed for its owner as every write of it is."""
        dropping = log.drop_messages(erasure.prefix, erasure.message_ids)
        return sealed(dropping, self._sealer, erasure.key.tenant, erasure.user)

    def erase_job(self, job: Job, _context: object) -> None:
        """Rewrite the job's conversation's node memories without the turns of its deleted
        messages (what a deletion's receipt could not do at once)."""
        if job.conversation_id is not None:
            self.erase(job.conversation_id)

    def erase(self, conversation_id: str) -> int:
        """Erase the turns of the conversation's deleted messages from its node memories;
        returns the marked rows dropped."""
        found = self._engine.run(read(partial(nodes_ops.erasures, conversation_id)))
        rows = 0
        for erasure in found:
            _, absorbed = self.blobs.run(self._erasing(erasure))
            rows += self._engine.run(write(partial(nodes_ops.erased, erasure, absorbed)))
        return rows

    async def aerase(self, conversation_id: str) -> int:
        """:meth:`erase`, on the event loop (a deletion's receipt, before its scan)."""
        found = await self._engine.arun(read(partial(nodes_ops.erasures, conversation_id)))
        rows = 0
        for erasure in found:
            _, absorbed = await self.blobs.arun(self._erasing(erasure))
            rows += await self._engine.arun(write(partial(nodes_ops.erased, erasure, absorbed)))
        return rows

    def compact_job(self, job: Job, _context: object) -> None:
        """Fold a generation's loose segments into one, and record what it absorbed."""
        p = job.payload
        key = NodeKey(p["tenant"], p["app_id"], p["conversation_id"], p["node_id"])
        gen = str(p["generation"])
        if job.user is None:  # every compaction is queued with its user; the key needs one
            return
        compacting = sealed(
            log.compact(key.prefix(gen), min_segments=2), self._sealer, key.tenant, job.user
        )
        absorbed = self.blobs.run(compacting)
        if absorbed:
            self._engine.run(write(lambda: nodes_ops.compacted(key, gen, absorbed)))


def blobs_for(core: Core) -> Blobs:
    """The node-memory blob store of ``core``."""
    return core.nodes.blobs


def use_blob_store(core: Core, store: BlobStore) -> Blobs:
    """Put ``store`` behind ``core``'s node memory (tests wrap a store to inject faults)."""
    return core.nodes.use(store)


def owned(core: Core, op: BlobOp[T], tenant: str, user: str) -> BlobOp[T]:
    """``op`` on the objects of a node memory of ``(tenant, user)``: sealed for them under
    encryption at rest (:mod:`memstrata.nodes.sealed`)."""
    return sealed(op, core.sealer, tenant, user)
