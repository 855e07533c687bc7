"""The features an opened memory runs, installed in order by :class:`~memstrata.api.core.Core`.

Each feature's ``install(core)`` adds what it brings: cascade steps run when
conversations, messages or users are deleted, job handlers, hooks at append, context
tiers, and its kit on the core (``core.context``, ``core.recall``, ``core.longterm``).
The order matters where features share an event (cascade steps run in the order they
were registered) and where one uses another's kit (tiers join ``core.context``).

A new feature writes one ``install(core)`` in its own package and adds one entry to
:data:`FEATURES`. The entries below whose packages have no ``install`` yet wire them here.
"""

from __future__ import annotations

import json
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from typing import TYPE_CHECKING

from memstrata import context as context_ops
from memstrata import state as state_ops
from memstrata.context import prefix
from memstrata.context.kit import COMPACT_JOB, ContextKit, compact_job
from memstrata.graph import feature as graph_feature
from memstrata.jobs import ops as jobs_ops
from memstrata.llm import llm_from_settings
from memstrata.nodes import ops as nodes_ops
from memstrata.nodes import service as nodes_service
from memstrata.nodes.layout import NodeKey
from memstrata.provenance import feature as provenance_feature
from memstrata.recall.service import RecallEngine
from memstrata.receipts import job as receipts_job
from memstrata.retention import job as retention_job
from memstrata.storage.plan import Op, Query
from memstrata.storage.sql import placeholders
from memstrata.usage import store as usage_store

if TYPE_CHECKING:
    from memstrata.api.core import Core

__all__ = ["FEATURES", "Feature"]


@dataclass(frozen=True, slots=True)
class Feature:
    """A named feature and how it installs itself on a core."""

    name: str
    install: Callable[[Core], None]


def _jobs(core: Core) -> None:
    core.rt.cascade.on_conversation_delete(jobs_ops.delete_for_conversations)
    core.rt.cascade.on_messages_delete(jobs_ops.delete_for_messages)
    core.rt.cascade.on_user_delete(jobs_ops.delete_for_user)


def _delete_vectors_of_conversations(ids: Sequence[str]) -> Op[None]:
    from memstrata.vectors.port import delete_for_conversations  # numpy only when used

    yield from delete_for_conversations(ids)


def _delete_vectors_of_messages(conversation_id: str, ids: Sequence[str]) -> Op[None]:
    from memstrata.vectors.port import delete_for_messages

    yield from delete_for_messages(conversation_id, ids)


def _delete_vectors_of_user(tenant: str, user: str) -> Op[None]:
    from memstrata.vectors.port import delete_for_user

    yield from delete_for_user(tenant, user)


def _vectors(core: Core) -> None:
    core.rt.cascade.on_conversation_delete(_delete_vectors_of_conversations)
    core.rt.cascade.on_messages_delete(_delete_vectors_of_messages)
    core.rt.cascade.on_user_delete(_delete_vectors_of_user)


def _context(core: Core) -> None:
    s = core.settings
    core.context = ContextKit(llm_from_settings(s), model=s.llm_model, wrap=core.wrap_llm)
    core.context.layout, core.context.low_water = s.context_layout, s.context_low_water
    core.rt.cascade.on_messages_delete(context_ops.forget_messages)
    core.rt.cascade.on_conversation_delete(prefix.forget_conversations)
    core.rt.cascade.on_messages_delete(prefix.forget_messages)
    # A summary whose cover point moved held a spliced-out message's text.
    core.rt.cascade.on_messages_moved(context_ops.forget_messages)
    core.rt.cascade.on_messages_moved(prefix.forget_messages)  # it hashed their old order
    core.jobs.register(COMPACT_JOB, compact_job)


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
    jobs = yield Query("SELECT payload FROM jobs WHERE kind = ?", (nodes_ops.PURGE_JOB,))
    for (payload,) in jobs:
        prefix = json.loads(payload).get("prefix") if payload else None
        if isinstance(prefix, str) and set(prefix.split("/")[3:4]) & wanted:
            prefixes.append(prefix)
    return sorted(set(prefixes))


def _nodes(core: Core) -> None:
    core.rt.cascade.on_conversation_delete(nodes_ops.cascade_step(core.rt))
    core.rt.cascade.on_conversation_blobs(_node_blob_prefixes)
    core.jobs.register(nodes_ops.PURGE_JOB, nodes_service.purge_job)
    core.jobs.register(nodes_ops.COMPACT_JOB, nodes_service.compact_job, lease_s=120.0)


def _state(core: Core) -> None:
    core.rt.cascade.on_conversation_delete(state_ops.delete_for_conversations)
    core.rt.cascade.on_user_delete(state_ops.delete_for_user)


def _recall(core: Core) -> None:
    core.recall = RecallEngine(core, core.requested_embedder)
    core.recall.install()


def _longterm(core: Core) -> None:
    from memstrata.longterm.service import install  # imports the context tiers

    install(core)


def _memory_health(core: Core) -> None:
    from memstrata.longterm import consolidate

    consolidate.install(core)


def _usage(core: Core) -> None:
    # Usage rows are the tenant's accounting: a deleted user's stay, re-attributed.
    core.rt.cascade.on_user_delete(usage_store.anonymise_user)


FEATURES: tuple[Feature, ...] = (
    Feature("jobs", _jobs),
    Feature("vectors", _vectors),
    Feature("context", _context),
    Feature("nodes", _nodes),
    Feature("state", _state),
    Feature("graph", graph_feature.install),
    Feature("recall", _recall),
    Feature("longterm", _longterm),
    Feature("retention", retention_job.install),
    Feature("provenance", provenance_feature.install),
    Feature("memory-health", _memory_health),
    Feature("usage", _usage),
    Feature("receipts", receipts_job.install),
)
