"""Which caller message ids a node memory holds (sans-IO SQL), for idempotent turns.

Dify keys a node's turns by run; a client that retries a run (or a request) would
store the turn twice. Each flushed message id is recorded with a digest of its
turns, so a flush can tell a replay (same digest: nothing to write) from a
replacement (another digest: the new turns are written as a revision, and the
digest becomes theirs) with one indexed read, and history can tell whether its
current message is stored yet. A node in a loop adds
every iteration of one message in the same flush: they share one digest.

The ids are recorded after the blob holding the turns is written, so a crash in
between can at worst store a replayed turn twice (as before), never lose one.
"""

from __future__ import annotations

import hashlib
import json
from collections.abc import Iterable, Sequence

from memstrata.nodes.layout import NodeKey, Turn
from memstrata.storage.plan import Exec, Op, Query
from memstrata.storage.sql import placeholders

__all__ = ["digests", "forget", "known", "record", "turn_digest"]

_KEY = "conversation_id = ? AND app_id = ? AND node_id = ? AND generation = ?"


def _key(key: NodeKey, generation: str) -> tuple[str, str, str, str]:
    return (key.conversation_id, key.app_id, key.node_id, generation)


def turn_digest(turns: Iterable[Turn]) -> str:
    """What identifies the turns of one message: everything but the stored uid and time."""
    body = [
        {k: v for k, v in t.to_json().items() if k not in ("uid", "created_at", "revision")}
        for t in turns
    ]
    text = json.dumps(body, sort_keys=True, ensure_ascii=False, separators=(",", ":"))
    return hashlib.sha256(text.encode()).hexdigest()


def digests(turns: Sequence[Turn]) -> dict[str, str]:
    """The digest of each message id's turns, in the order the ids first appear."""
    groups: dict[str, list[Turn]] = {}
    for t in turns:
        groups.setdefault(t.message_id, []).append(t)
    return {mid: turn_digest(ts) for mid, ts in groups.items()}


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
