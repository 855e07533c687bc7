"""The node memory index (sans-IO SQL): one row per node memory, naming its generation.

The blobs of a node memory live under a prefix that includes a random
*generation*; only the generation named by this row is readable. Deleting the
row (clear, gc, or the conversation cascade, all transactional) therefore makes
the blobs unreachable at once; the blobs themselves are deleted afterwards by a
``nodes.purge`` job queued in the same transaction. A crash between the two
leaves only unreachable objects, never readable orphans, and a conversation
re-created with the same id starts a new generation.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

from memstrata.conversation.conversations import get_conversation
from memstrata.ids import new_id
from memstrata.jobs import ops as jobs_ops
from memstrata.nodes import turn_ids
from memstrata.nodes.layout import NodeKey
from memstrata.runtime import Runtime
from memstrata.storage.cascade import ConversationStep, MessageStep
from memstrata.storage.plan import Exec, Op, Query
from memstrata.storage.sql import placeholders
from memstrata.types import Scope

__all__ = [
    "COMPACT_JOB",
    "ERASE_JOB",
    "PURGE_JOB",
    "Erasure",
    "GcReport",
    "IndexRow",
    "Readable",
    "cascade_step",
    "compare",
    "erase_step",
    "erased",
    "erasures",
    "generation",
    "is_stored",
    "owners",
    "readable",
    "record_turns",
    "remove",
    "stale",
    "touch",
]

PURGE_JOB = "nodes.purge"
COMPACT_JOB = "nodes.compact"
#: Rewrites a conversation's node memories without the turns of its deleted messages.
ERASE_JOB = "nodes.erase"

_KEY = "conversation_id = ? AND app_id = ? AND node_id = ?"


def _key(key: NodeKey) -> tuple[str, str, str]:
    return (key.conversation_id, key.app_id, key.node_id)


@dataclass(frozen=True, slots=True)
class GcReport:
    """What a gc run found (and, unless a dry run, deleted)."""

    node_memories: int
    objects: int
    bytes: int
    dry_run: bool

    def to_dict(self) -> dict[str, Any]:
        return {
            "node_memories": self.node_memories,
            "objects": self.objects,
            "bytes": self.bytes,
            "dry_run": self.dry_run,
        }


@dataclass(frozen=True, slots=True)
class Erasure:
    """Turns to erase from one node memory's readable generation: those of deleted
    messages (``message_ids``), sealed for ``user``, the conversation's owner."""

    key: NodeKey
    generation: str
    user: str
    message_ids: tuple[str, ...]

    @property
    def prefix(self) -> str:
        return self.key.prefix(self.generation)


@dataclass(frozen=True, slots=True)
class IndexRow:
    key: NodeKey
    generation: str
    last_write_at: int

    @property
    def prefix(self) -> str:
        return self.key.prefix(self.generation)


def owners() -> Op[list[tuple[str, NodeKey]]]:
    """Every node memory with the user its objects are sealed for (its conversation's
    owner), for store-wide passes such as ``memstrata encrypt --all``."""
    rows = yield Query(
        "SELECT c.user_id, n.tenant_id, n.app_id, n.conversation_id, n.node_id "
        "FROM node_memories n JOIN conversations c ON c.id = n.conversation_id "
        "ORDER BY n.conversation_id, n.app_id, n.node_id"
    )
    return [(str(r[0]), NodeKey(r[1], r[2], r[3], r[4])) for r in rows]


def generation(scope: Scope, key: NodeKey) -> Op[str | None]:
    """The readable generation (None: nothing written); 404 if the conversation is not
    the caller's."""
    yield from get_conversation(scope, key.conversation_id)
    rows = yield Query(f"SELECT generation FROM node_memories WHERE {_KEY}", _key(key))
    return str(rows[0][0]) if rows else None


def compare(
    scope: Scope, key: NodeKey, wanted: dict[str, turn_ids.Digests]
) -> Op[tuple[set[str], set[str]]]:
    """Of ``wanted`` (message id -> digests of its turns): the ids stored with the same turns
    (replays) and those stored with other turns (to be replaced)."""
    gen = yield from generation(scope, key)
    if gen is None:
        return set(), set()
    stored = yield from turn_ids.known(key, gen, list(wanted))
    same = {mid for mid, digest in stored.items() if wanted[mid].same(digest)}
    return same, set(stored) - same


def is_stored(scope: Scope, key: NodeKey, message_id: str) -> Op[tuple[str | None, bool]]:
    """The readable generation and whether ``message_id`` has a turn in it. A generation
    written before ids were recorded answers True (the thread walk then looks for it)."""
    gen = yield from generation(scope, key)
    if gen is None:
        return None, False
    if (yield from turn_ids.known(key, gen, [message_id])):
        return gen, True
    return gen, not (yield from turn_ids.any_recorded(key, gen))


@dataclass(frozen=True, slots=True)
class Readable:
    """What a reader of a node memory needs before its blobs: the readable generation
    (None: nothing written), whether the message it seeks is stored, and the ids whose
    turns a message deletion is erasing (left out until they are gone)."""

    generation: str | None
    stored: bool
    erasing: frozenset[str]


def readable(scope: Scope, key: NodeKey, seek: str | None = None) -> Op[Readable]:
    """:class:`Readable` of a node memory (``seek``: a message id to look up, as
    :func:`is_stored`); 404 if the conversation is not the caller's."""
    if seek is None:
        gen, stored = (yield from generation(scope, key)), False
    else:
        gen, stored = yield from is_stored(scope, key, seek)
    gone = frozenset() if gen is None else (yield from turn_ids.erasing(key, gen))
    return Readable(gen, stored and seek not in gone, gone)


def record_turns(key: NodeKey, gen: str, ids: dict[str, str], now: int) -> Op[None]:
    yield from turn_ids.record(key, gen, ids, now)


def touch(rt: Runtime, scope: Scope, key: NodeKey, segments: int) -> Op[tuple[str, int]]:
    """Record a write of ``segments`` new segments; returns the generation to write to
    and how many segments wait for compaction."""
    yield from get_conversation(scope, key.conversation_id)
    now = rt.clock()
    n = yield Exec(
        f"UPDATE node_memories SET last_write_at = ?, pending = pending + ? WHERE {_KEY}",
        (now, segments, *_key(key)),
    )
    if not n:
        # Two first writers may race here: the row that lands first names the generation.
        yield Exec(
            "INSERT INTO node_memories (conversation_id, app_id, node_id, tenant_id, generation, "
            "pending, created_at, last_write_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (conversation_id, app_id, node_id) DO NOTHING",
            (*_key(key), key.tenant, new_id(), segments, now, now),
        )
    rows = yield Query(f"SELECT generation, pending FROM node_memories WHERE {_KEY}", _key(key))
    generation, pending = rows[0]
    return str(generation), int(pending)


def compacted(key: NodeKey, gen: str, absorbed: int) -> Op[None]:
    yield Exec(
        "UPDATE node_memories SET pending = CASE WHEN pending > ? THEN pending - ? ELSE 0 END "
        f"WHERE {_KEY} AND generation = ?",
        (absorbed, absorbed, *_key(key), gen),
    )


def _enqueue_purge(rt: Runtime, row: IndexRow) -> Op[None]:
    yield from jobs_ops.enqueue(
        job_id=rt.make_id(),
        kind=PURGE_JOB,
        key=None,
        tenant=row.key.tenant,
        user=None,
        agent=None,
        conversation_id=None,  # outlives the conversation: the jobs cascade must not drop it
        payload={"prefix": row.prefix},
        flags=None,
        delay_s=0.0,
        max_wait_s=0.0,
        max_attempts=10,
        now=rt.clock(),
    )


def _rows(where: str, params: Sequence[object], limit: int | None = None) -> Op[list[IndexRow]]:
    sql = (
        "SELECT tenant_id, app_id, conversation_id, node_id, generation, last_write_at "
        f"FROM node_memories WHERE {where} ORDER BY last_write_at, conversation_id, app_id, node_id"
    )
    if limit is not None:
        sql += f" LIMIT {int(limit)}"
    rows = yield Query(sql, params)
    return [
        IndexRow(NodeKey(tenant, app, conversation, node), str(generation), int(last_write_at))
        for tenant, app, conversation, node, generation, last_write_at in rows
    ]


def _drop(rt: Runtime, rows: list[IndexRow], enqueue: bool) -> Op[None]:
    for row in rows:
        n = yield Exec(
            f"DELETE FROM node_memories WHERE {_KEY} AND generation = ?",
            (*_key(row.key), row.generation),
        )
        yield from turn_ids.forget(row.key, row.generation)
        if n and enqueue:
            yield from _enqueue_purge(rt, row)


def remove(rt: Runtime, scope: Scope, key: NodeKey, *, enqueue: bool = True) -> Op[IndexRow | None]:
    """Forget a node memory (its blobs become unreachable at commit); returns its row."""
    yield from get_conversation(scope, key.conversation_id)
    rows = yield from _rows(_KEY, _key(key))
    yield from _drop(rt, rows, enqueue)
    return rows[0] if rows else None


def stale(cutoff: int, limit: int, tenant: str | None = None) -> Op[list[IndexRow]]:
    """Node memories last written before ``cutoff`` (microseconds), oldest first."""
    if tenant is None:
        return (yield from _rows("last_write_at < ?", (cutoff,), limit))
    return (yield from _rows("last_write_at < ? AND tenant_id = ?", (cutoff, tenant), limit))


def drop_rows(rt: Runtime, rows: list[IndexRow], *, enqueue: bool) -> Op[None]:
    yield from _drop(rt, rows, enqueue)


def cascade_step(rt: Runtime) -> ConversationStep:
    """The conversation-delete step: forget the node memories, queue their blobs' purge."""

    def step(ids: Sequence[str]) -> Op[None]:
        marks = placeholders(len(ids))
        rows = yield from _rows(f"conversation_id IN ({marks})", list(ids))
        yield from _drop(rt, rows, enqueue=True)

    return step


def erase_step(rt: Runtime) -> MessageStep:
    """The message-delete step: mark the deleted messages' ids in the conversation's node
    memories and queue the job that erases their turns (merged into one queued per
    conversation). The deletion's receipt runs the erasure at once; the job is what
    remains if that cannot happen now (a crash, the blob store down)."""

    def step(conversation_id: str, ids: Sequence[str]) -> Op[None]:
        if not (yield from turn_ids.mark_erasing(conversation_id, ids)):
            return
        rows = yield Query(
            "SELECT tenant_id, user_id FROM conversations WHERE id = ?", (conversation_id,)
        )
        tenant, user = rows[0]
        yield from jobs_ops.enqueue(
            job_id=rt.make_id(),
            kind=ERASE_JOB,
            key=conversation_id,
            tenant=str(tenant),
            user=str(user),
            agent=None,
            conversation_id=conversation_id,  # the conversation's deletion purges it all
            payload={},
            flags=None,
            delay_s=0.0,
            max_wait_s=0.0,
            max_attempts=10,
            now=rt.clock(),
        )

    return step


def erasures(conversation_id: str) -> Op[list[Erasure]]:
    """The node memories of a conversation with turns of deleted messages still stored."""
    rows = yield Query(
        "SELECT n.tenant_id, n.app_id, n.node_id, n.generation, c.user_id, t.message_id "
        "FROM node_turn_ids t JOIN node_memories n ON n.conversation_id = t.conversation_id "
        "AND n.app_id = t.app_id AND n.node_id = t.node_id AND n.generation = t.generation "
        "JOIN conversations c ON c.id = n.conversation_id "
        "WHERE t.conversation_id = ? AND t.erasing = 1 "
        "ORDER BY n.app_id, n.node_id, t.message_id",
        (conversation_id,),
    )
    found: dict[tuple[str, str, str, str, str], list[str]] = {}
    for tenant, app, node, gen, user, mid in rows:
        found.setdefault((str(tenant), str(app), str(node), str(gen), str(user)), []).append(
            str(mid)
        )
    return [
        Erasure(NodeKey(tenant, app, conversation_id, node), gen, user, tuple(ids))
        for (tenant, app, node, gen, user), ids in found.items()
    ]


def erased(erasure: Erasure, absorbed: int) -> Op[int]:
    """After the blobs were rewritten: drop the marked rows (returns how many) and count
    the segments the rewrite absorbed as compacted."""
    yield from compacted(erasure.key, erasure.generation, absorbed)
    n = yield from turn_ids.erased(erasure.key, erasure.generation, erasure.message_ids)
    return n
