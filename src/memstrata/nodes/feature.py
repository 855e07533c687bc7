"""What node memory adds to an opened memory: its kit (the blob store), its jobs, and
the cascade steps (a deleted conversation's node memories, and their blob prefixes for
deletion receipts; a deleted message's turns, erased after the deletion commits)."""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import TYPE_CHECKING

from memstrata.nodes import ops
from memstrata.nodes.layout import NodeKey
from memstrata.nodes.service import NodesKit
from memstrata.storage.plan import Op, Query
from memstrata.storage.sql import placeholders

if TYPE_CHECKING:
    from memstrata.api.core import Core

__all__ = ["install"]


def install(core: Core) -> NodesKit:
    kit = NodesKit(core.engine, core.open_blob_store, core.sealer)
    core.rt.cascade.on_conversation_delete(ops.cascade_step(core.rt))
    core.rt.cascade.on_conversation_blobs(_node_blob_prefixes)
    core.rt.cascade.on_messages_delete(ops.erase_step(core.rt))
    core.jobs.register(ops.PURGE_JOB, kit.purge_job)
    core.jobs.register(ops.COMPACT_JOB, kit.compact_job, lease_s=120.0)
    core.jobs.register(ops.ERASE_JOB, kit.erase_job, lease_s=120.0)
    return kit


def _node_blob_prefixes(ids: Sequence[str]) -> Op[list[str]]:
    """The blob prefixes of the node memories of conversations (for deletion receipts): the
    readable generations, and those earlier clears left to a purge job (its payload names
    the conversation until the receipt purges the prefix and drops the job)."""
    rows = yield Query(
        "SELECT tenant_id, app_id, conversation_id, node_id, generation FROM node_memories "
        f"WHERE conversation_id IN ({placeholders(len(ids))})",
        list(ids),
    )
    prefixes = [NodeKey(t, a, c, n).prefix(str(g)) for t, a, c, n, g in rows]
    wanted = set(ids)
    jobs = yield Query("SELECT payload FROM jobs WHERE kind = ?", (ops.PURGE_JOB,))
    for (payload,) in jobs:
        prefix = json.loads(payload).get("prefix") if payload else None
        if isinstance(prefix, str) and set(prefix.split("/")[3:4]) & wanted:
            prefixes.append(prefix)
    return sorted(set(prefixes))
