"""Which caller message ids a node memory holds (sans-IO SQL), for idempotent turns.

Dify keys a node's turns by run; a client that retries a run (or a request) would
store the turn twice. Each flushed message id is recorded with a digest of its
turns, so a flush can tell a replay (same digest: nothing to write) from a
replacement (another digest: the new turns are written as a revision, and the
digest becomes theirs) with one indexed read, and history can tell whether its
current message is stored yet. A node in a loop adds
every iteration of one message in the same flush: they share one digest. With
encryption at rest the digest is keyed with the owner's digest key, as the turns are
sealed (an unkeyed digest would confirm a guess of them).

The ids are recorded after the blob holding the turns is written, so a crash in
between can at worst store a replayed turn twice (as before), never lose one.
"""

from __future__ import annotations

import json
from collections.abc import Iterable, Sequence
from typing import NamedTuple

from memstrata.nodes.layout import NodeKey, Turn
from memstrata.sealing import content_hash
from memstrata.storage.plan import Exec, Op, Query
from memstrata.storage.sql import placeholders

__all__ = [
    "Digests",
    "digests",
    "erased",
    "erasing",
    "forget",
    "known",
    "mark_erasing",
    "record",
    "turn_digest",
]

_KEY = "conversation_id = ? AND app_id = ? AND node_id = ? AND generation = ?"


def _key(key: NodeKey, generation: str) -> tuple[str, str, str, str]:
    return (key.conversation_id, key.app_id, key.node_id, generation)


class Digests(NamedTuple):
    """A message's turns' digest as recorded now, and the unkeyed one an earlier version
    recorded under encryption (None with encryption off: the two are the same)."""

    now: str
    before: str | None

    def same(self, stored: str) -> bool:
        return stored == self.now or (self.before is not None and stored == self.before)


def known(key: NodeKey, generation: str, message_ids: Sequence[str]) -> Op[dict[str, str]]:
    """The stored digests of those of ``message_ids`` this generation holds."""
    if not message_ids:
        return {}
    marks = placeholders(len(message_ids))
    rows = yield Query(
        f"SELECT message_id, digest FROM node_turn_ids WHERE {_KEY} AND message_id IN ({marks})",
        (*_key(key, generation), *message_ids),
    )
    return {str(message_id): str(digest) for message_id, digest in rows}


def any_recorded(key: NodeKey, generation: str) -> Op[bool]:
    """Whether this generation records ids at all (one written before they were kept does not)."""
    rows = yield Query(f"SELECT 1 FROM node_turn_ids WHERE {_KEY} LIMIT 1", _key(key, generation))
    return bool(rows)


def record(key: NodeKey, generation: str, ids: dict[str, str], now: int) -> Op[None]:
    for mid, digest in ids.items():
        yield Exec(
            "INSERT INTO node_turn_ids (conversation_id, app_id, node_id, generation, message_id, "
            "digest, created_at) VALUES (?, ?, ?, ?, ?, ?, ?) "
            "ON CONFLICT (conversation_id, app_id, node_id, generation, message_id) "
            "DO UPDATE SET digest = excluded.digest",
            (*_key(key, generation), mid, digest, now),
        )


def forget(key: NodeKey, generation: str) -> Op[None]:
    yield Exec(f"DELETE FROM node_turn_ids WHERE {_KEY}", _key(key, generation))


def mark_erasing(conversation_id: str, message_ids: Sequence[str]) -> Op[int]:
    """Mark the recorded ids of deleted messages in every node memory of the conversation
    (their turns are to be erased from the blobs); returns how many rows were marked."""
    marks = placeholders(len(message_ids))
    n = yield Exec(
        "UPDATE node_turn_ids SET erasing = 1 "
        f"WHERE conversation_id = ? AND message_id IN ({marks}) AND erasing = 0",
        (conversation_id, *message_ids),
    )
    return int(n)


def erasing(key: NodeKey, generation: str) -> Op[frozenset[str]]:
    """The ids whose turns await their erasure in this generation (readers leave them out)."""
    rows = yield Query(
        f"SELECT message_id FROM node_turn_ids WHERE {_KEY} AND erasing = 1",
        _key(key, generation),
    )
    return frozenset(str(r[0]) for r in rows)


def erased(key: NodeKey, generation: str, message_ids: Sequence[str]) -> Op[int]:
    """Drop the marked rows of ``message_ids`` once their turns are gone from the blobs."""
    marks = placeholders(len(message_ids))
    n = yield Exec(
        f"DELETE FROM node_turn_ids WHERE {_KEY} AND erasing = 1 AND message_id IN ({marks})",
        (*_key(key, generation), *message_ids),
    )
    return int(n)


def turn_digest(turns: Iterable[Turn], key: bytes | None = None) -> str:
    """What identifies the turns of one message: everything but the stored uid and time;
    keyed with the owner's digest key under encryption at rest (``key``, see
    :func:`memstrata.sealing.content_hash`): the turns are sealed, their digest must not
    confirm a guess of them."""
    body = [
        {k: v for k, v in t.to_json().items() if k not in ("uid", "created_at", "revision")}
        for t in turns
    ]
    text = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    h = content_hash(key)
    h.update(text.encode())
    return str(h.hexdigest())


def digests(turns: Sequence[Turn], key: bytes | None = None) -> dict[str, Digests]:
    """The digests of each message id's turns, in the order the ids first appear: as
    recorded now (keyed under encryption) and, under encryption, as recorded before
    digests were keyed (such a digest still names a replay, until the turns are written
    again)."""
    groups: dict[str, list[Turn]] = {}
    for t in turns:
        groups.setdefault(t.message_id, []).append(t)
    return {
        mid: Digests(turn_digest(ts, key), None if key is None else turn_digest(ts))
        for mid, ts in groups.items()
    }
