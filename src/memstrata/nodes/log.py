"""The object layout of one node memory generation, as sans-IO blob operations.

Under a generation's prefix::

    seg/<uuid7>        one flush: the turns it made durable (write-once, create-if-absent)
    chunk/<uuid7>      many segments' turns, written by compaction (write-once)
    ckpt/<n:012d>      checkpoint n: the chunks in log order and the segment names it
                       absorbed (write-once: two compactions racing for n, one wins)

A flush writes one new segment whatever the history's length, and no object is
ever overwritten, so concurrent writers (processes, hosts) need no lock and
cannot lose a turn. The log order is: the latest checkpoint's chunks, then the
segments it did not absorb, by name (UUIDv7, so about arrival order).

Compaction (a background job) folds the loose segments into a chunk (several when they
hold more than ``CHUNK_TURNS`` turns) and writes checkpoint n+1 with create-if-absent;
only the winner deletes what it absorbed.
Segments absorbed by checkpoint n are deleted before checkpoint n+1 is written,
so a reader that lists segments first and then checkpoints never counts a turn
twice; one whose object vanished under it starts over. History reads newest
first and stops once it has what it returns. A message added again with other
content is a new segment whose turns carry a ``revision``: readers show it in
the place of the first turns, which stay in the log.
"""

from __future__ import annotations

from collections.abc import Callable, Collection, Iterator
from dataclasses import dataclass, field
from typing import Any, Protocol

from memstrata.blobs import BlobMeta, BlobOp, Delete, Get, List, Put
from memstrata.errors import BackendUnavailable, Corruption, NotFound, PreconditionFailed
from memstrata.ids import new_id
from memstrata.nodes.layout import (
    Turn,
    decode,
    decode_turns,
    encode,
    mentions,
    parse_turns,
    unpack,
)
from memstrata.nodes.revisions import Revisions

__all__ = [
    "Manifest",
    "compact",
    "count_turns",
    "drop_messages",
    "message_log",
    "purge",
    "read_newest_first",
    "write_segment",
]

READ_ATTEMPTS = 8
#: Most turns in one chunk. Turns flushed in bulk (an import) are compacted into several
#: chunks, so deleting a message rewrites at most this many turns, not all of them, and a
#: history read that reaches an old chunk decodes no more than this many.
CHUNK_TURNS = 256


class Consumer(Protocol):
    """Takes turns newest first; True once it needs nothing older."""

    done: bool

    def feed(self, turns: list[Turn]) -> bool: ...


@dataclass(frozen=True, slots=True)
class Manifest:
    seq: int = 0
    chunks: tuple[str, ...] = ()  # names, oldest first
    chunk_turns: tuple[int, ...] = ()
    absorbed: frozenset[str] = field(default_factory=frozenset)

    def to_body(self) -> dict[str, Any]:
        return {
            "seq": self.seq,
            "chunks": [
                {"name": n, "turns": c} for n, c in zip(self.chunks, self.chunk_turns, strict=True)
            ],
            "absorbed": sorted(self.absorbed),
        }


def _name(key: str) -> str:
    return key.rsplit("/", 1)[-1]


def _ckpt_key(prefix: str, seq: int) -> str:
    return f"{prefix}ckpt/{seq:012d}"


def _load_manifest(key: str, data: bytes) -> Manifest:
    doc = decode(data, key, "checkpoint")
    try:
        chunks = doc["chunks"]
        return Manifest(
            seq=int(doc["seq"]),
            chunks=tuple(str(c["name"]) for c in chunks),
            chunk_turns=tuple(int(c["turns"]) for c in chunks),
            absorbed=frozenset(str(a) for a in doc["absorbed"]),
        )
    except (KeyError, TypeError, ValueError) as exc:
        raise Corruption(f"node memory checkpoint {key} is malformed: {exc}", key=key) from None


def write_segment(prefix: str, turns: list[Turn]) -> BlobOp[str]:
    """Make ``turns`` durable as one new segment; returns its key."""
    key = f"{prefix}seg/{new_id()}"
    yield Put(key, encode("segment", {"turns": [t.to_json() for t in turns]}), "create")
    return key


def _state(prefix: str) -> BlobOp[tuple[list[str], Manifest]]:
    """Loose segment keys (oldest first) and the latest checkpoint. Segments are listed
    before checkpoints: see the module docstring for why that order is safe."""
    segs: list[BlobMeta] = yield List(f"{prefix}seg/")
    ckpts: list[BlobMeta] = yield List(f"{prefix}ckpt/")
    manifest = Manifest()
    if ckpts:
        latest = max(m.key for m in ckpts)
        blob = yield Get(latest)
        manifest = _load_manifest(latest, blob.data)
    loose = sorted(m.key for m in segs if _name(m.key) not in manifest.absorbed)
    return loose, manifest


def _sources(prefix: str, loose: list[str], manifest: Manifest) -> Iterator[tuple[str, str]]:
    """Objects newest first, with the kind each holds."""
    for key in reversed(loose):
        yield key, "segment"
    for name in reversed(manifest.chunks):
        yield f"{prefix}chunk/{name}", "chunk"


def read_newest_first(
    prefix: str,
    make_consumer: Callable[[], Consumer],
    *,
    skip_damaged: bool = False,
    superseded: bool = False,
    leave_out: Collection[str] = (),
) -> BlobOp[tuple[Consumer, int, list[str]]]:
    """Feed the generation's turns to a fresh consumer, newest first, until it is satisfied.

    Turns of the messages in ``leave_out`` (being erased after their deletion) are not fed.

    A replaced message's newest revision is fed in the place of its first turns and
    older revisions are skipped (:mod:`memstrata.nodes.revisions`), unless
    ``superseded`` asks for every stored turn as written. Returns the consumer, the
    number of objects read and the keys of damaged objects skipped (only with
    ``skip_damaged``; otherwise a damaged object raises Corruption naming its key).
    """
    for _ in range(READ_ATTEMPTS):
        consumer = make_consumer()
        objects = 0
        damaged: list[str] = []
        seen: set[str] = set()
        revisions = Revisions()
        if consumer.done:  # satisfied before reading anything (unflushed turns)
            return consumer, 0, []
        try:
            loose, manifest = yield from _state(prefix)
            objects += 1 if manifest.seq else 0
            for key, kind in _sources(prefix, loose, manifest):
                blob = yield Get(key)
                objects += 1
                try:
                    turns = decode_turns(blob.data, key, kind)
                except Corruption:
                    if not skip_damaged:
                        raise
                    damaged.append(key)
                    continue
                fresh = [
                    t
                    for t in reversed(turns)
                    if t.uid not in seen and t.message_id not in leave_out
                ]
                seen.update(t.uid for t in fresh)
                if consumer.feed(fresh if superseded else revisions.apply(fresh)):
                    break
            else:
                if leftover := revisions.unplaced():
                    consumer.feed(leftover)
        except NotFound:
            continue  # a compaction moved things under us: list again
        return consumer, objects, damaged
    raise BackendUnavailable(
        f"node memory {prefix} kept changing while it was read; try again", key=prefix
    )


def _settled(prefix: str) -> BlobOp[tuple[list[str], Manifest]]:
    """The latest checkpoint and the loose segment keys beside it (oldest first), after
    deleting what earlier compactions left behind: the segments the latest checkpoint
    absorbed and the checkpoints before it."""
    ckpts: list[BlobMeta] = yield List(f"{prefix}ckpt/")
    manifest = Manifest()
    keys = sorted(m.key for m in ckpts)
    if keys:
        blob = yield Get(keys[-1])
        manifest = _load_manifest(keys[-1], blob.data)
    # What the previous winner absorbed must be gone before a newer checkpoint exists.
    if manifest.absorbed:
        yield Delete(tuple(f"{prefix}seg/{n}" for n in sorted(manifest.absorbed)))
    if len(keys) > 1:
        yield Delete(tuple(keys[:-1]))
    segs: list[BlobMeta] = yield List(f"{prefix}seg/")
    loose = sorted(m.key for m in segs if _name(m.key) not in manifest.absorbed)
    return loose, manifest


def _commit(
    prefix: str,
    base: Manifest,
    chunks: list[tuple[str, int]],
    fresh: dict[str, list[dict[str, Any]]],
    taken: list[str],
) -> BlobOp[bool]:
    """Write the ``fresh`` chunks, then the checkpoint after ``base`` naming ``chunks``
    (name and turns, in log order) and absorbing the segments ``taken``; False (nothing
    left behind) when another writer wrote that checkpoint first (see :func:`_head` for
    what a success does not prove)."""
    for name, turns in fresh.items():
        yield Put(f"{prefix}chunk/{name}", encode("chunk", {"turns": turns}), "create")
    nxt = Manifest(
        seq=base.seq + 1,
        chunks=tuple(n for n, _ in chunks),
        chunk_turns=tuple(c for _, c in chunks),
        absorbed=frozenset(taken),
    )
    mine = tuple(f"{prefix}chunk/{n}" for n in fresh)
    try:
        yield Put(_ckpt_key(prefix, nxt.seq), encode("checkpoint", nxt.to_body()), "create")
    except PreconditionFailed:  # lost the race: our chunks are unreferenced
        yield Delete(mine)
        return False
    return True


def _head(prefix: str) -> BlobOp[tuple[str, frozenset[str]] | None]:
    """The latest checkpoint's key and the chunks it names; None when it could not be
    read (every attempt found it deleted: newer ones kept coming), so nothing may be
    deleted on its word.

    Checkpoints older than the latest are deleted, so a writer whose base was stale can
    create one of them again: its commit succeeds without making it the latest. What a
    commit replaced or absorbed is therefore deleted only as the latest checkpoint allows:
    a chunk it does not name (no later latest can: each is built on the one before), and
    segments folded into a chunk it names (or absorbed by a later one already)."""
    for _ in range(READ_ATTEMPTS):
        ckpts: list[BlobMeta] = yield List(f"{prefix}ckpt/")
        if not ckpts:
            return "", frozenset()
        latest = max(m.key for m in ckpts)
        try:
            blob = yield Get(latest)
        except NotFound:  # a newer one came between the list and the read: list again
            continue
        return latest, frozenset(_load_manifest(latest, blob.data).chunks)
    return None


def _named(manifest: Manifest) -> list[tuple[str, int]]:
    return list(zip(manifest.chunks, manifest.chunk_turns, strict=True))


def _pieces(turns: list[dict[str, Any]]) -> list[tuple[str, list[dict[str, Any]]]]:
    """New chunks (name, turns) for ``turns`` in log order, :data:`CHUNK_TURNS` at most
    each; one, empty, for none."""
    step = max(CHUNK_TURNS, 1)
    return [(new_id(), turns[i : i + step]) for i in range(0, len(turns), step)] or [(new_id(), [])]


def compact(prefix: str, min_segments: int) -> BlobOp[int]:
    """Fold the loose segments into a chunk (several, past :data:`CHUNK_TURNS` turns);
    returns how many segments were absorbed (0: too few, another compaction won, or
    nothing readable)."""
    loose, manifest = yield from _settled(prefix)
    if len(loose) < min_segments:
        return 0
    turns: list[dict[str, Any]] = []
    taken: list[str] = []
    for key in loose:
        try:
            blob = yield Get(key)
            turns.extend(t.to_json() for t in decode_turns(blob.data, key, "segment"))
        except (NotFound, Corruption):
            continue  # gone (another compaction) or damaged: left where it is
        taken.append(_name(key))
    if not taken:
        return 0
    pieces = _pieces(turns)
    chunks = [*_named(manifest), *((n, len(t)) for n, t in pieces)]
    if not (yield from _commit(prefix, manifest, chunks, dict(pieces), taken)):
        return 0
    head = yield from _head(prefix)
    # A stale base (see _head), or a latest that could not be read: the segments may
    # still be loose, so they stay (the next _settled deletes them once absorbed).
    if head is None or pieces[0][0] not in head[1]:
        return 0
    yield Delete(tuple(f"{prefix}seg/{n}" for n in taken))
    return len(taken)


@dataclass
class _Rewrite:
    """What erasing some messages' turns from a generation writes and deletes."""

    chunks: list[tuple[str, int]] = field(default_factory=list)  # the new checkpoint's
    fresh: dict[str, list[dict[str, Any]]] = field(default_factory=dict)  # chunks to write
    replaced: list[str] = field(default_factory=list)  # chunk keys to delete after
    removed: int = 0  # turns left out of chunks
    folded: list[dict[str, Any]] = field(default_factory=list)  # the loose segments' rest
    loose_removed: int = 0  # turns left out of loose segments
    stray: list[str] = field(default_factory=list)  # unnamed chunks holding such turns


def _plan(
    prefix: str, loose: list[str], manifest: Manifest, ids: set[str], clean: set[str]
) -> BlobOp[_Rewrite]:
    """Read the generation and plan the rewrite (NotFound: it moved). Chunks in ``clean``
    (objects are never rewritten in place, so one found without such a turn stays so) are
    not read again, and the chunks read without one are added to it."""

    def split(turns: list[Turn]) -> tuple[list[dict[str, Any]], int]:
        kept = [t.to_json() for t in turns if t.message_id not in ids]
        return kept, len(turns) - len(kept)

    def split_chunk(key: str, data: bytes) -> tuple[list[dict[str, Any]], int]:
        raw = unpack(data, key)
        if all(mentions(raw, i) is False for i in ids):
            return [], 0  # no such id anywhere in it: not parsed (the kept turns unused)
        return split(parse_turns(raw, key, "chunk"))

    plan = _Rewrite()
    for name, count in _named(manifest):
        key = f"{prefix}chunk/{name}"
        if key in clean:
            plan.chunks.append((name, count))
            continue
        blob = yield Get(key)
        kept, gone = split_chunk(key, blob.data)
        if not gone:
            clean.add(key)
            plan.chunks.append((name, count))
            continue
        plan.removed += gone
        plan.replaced.append(key)
        for new, piece in _pieces(kept) if kept else ():
            plan.fresh[new] = piece
            plan.chunks.append((new, len(piece)))
    for key in loose:  # a few at most: compaction folds them
        blob = yield Get(key)
        kept, gone = split(decode_turns(blob.data, key, "segment"))
        plan.folded += kept
        plan.loose_removed += gone
    named = set(manifest.chunks)
    for meta in (yield from listing(f"{prefix}chunk/")):
        if _name(meta.key) not in named and meta.key not in clean:
            blob = yield Get(meta.key)
            if split_chunk(meta.key, blob.data)[1]:
                plan.stray.append(meta.key)
            else:
                clean.add(meta.key)
    return plan


def drop_messages(prefix: str, message_ids: Collection[str]) -> BlobOp[tuple[int, int]]:
    """Rewrite the generation without any turn of ``message_ids`` (every revision);
    returns the turns removed and the loose segments absorbed.

    Only what holds such a turn is rewritten: each such chunk becomes a new one without
    it, in its place (chunks keep their size, so history still stops after the newest
    few; one over ``CHUNK_TURNS`` turns, written before that bound, becomes several), and
    when a loose segment holds one, the loose segments are folded into new chunks, as a
    compaction does. A new checkpoint names the result; the objects that held
    the turns are deleted after it. A chunk no checkpoint names that holds such a turn
    (left by a crash between a rewrite's checkpoint and its deletes, or by a compaction
    that has lost its race) is deleted too. A damaged object raises Corruption: whether
    it holds such a turn cannot be told, so the erasure is not reported done.
    """
    ids = set(message_ids)
    removed = absorbed = attempts = 0
    clean: set[str] = set()  # chunks known to hold none of them: not read again
    while attempts < READ_ATTEMPTS:
        loose, manifest = yield from _settled(prefix)
        try:
            plan = yield from _plan(prefix, loose, manifest, ids, clean)
        except NotFound:
            attempts += 1
            continue  # a compaction moved things under us: start over
        # A stray chunk may belong to a compaction still running; it can no longer win
        # once a checkpoint past the one it read exists: here, when nothing is left to
        # remove, or once this rewrite's checkpoint is written.
        if not plan.removed and not plan.loose_removed:
            if plan.stray:
                yield Delete(tuple(plan.stray))
            return removed, absorbed
        taken = [_name(k) for k in loose] if plan.loose_removed else []
        folded = _pieces(plan.folded) if taken and plan.folded else []
        for name, piece in folded:
            plan.fresh[name] = piece
            plan.chunks.append((name, len(piece)))
        if not (yield from _commit(prefix, manifest, plan.chunks, plan.fresh, taken)):
            attempts += 1
            continue
        clean.update(f"{prefix}chunk/{n}" for n in plan.fresh)
        latest = yield from _head(prefix)
        if latest is None:  # whether the commit took cannot be told: read again
            attempts += 1
            continue
        head, named = latest
        gone = [k for k in plan.replaced + plan.stray if _name(k) not in named]
        if taken and (
            (folded and folded[0][0] in named) or head == _ckpt_key(prefix, manifest.seq + 1)
        ):
            gone += loose
            absorbed += len(taken)
        if gone:
            yield Delete(tuple(gone))
        removed += plan.removed + plan.loose_removed
        # Read again: done once a pass finds nothing (a stale base left the turns in place).
    raise BackendUnavailable(
        f"node memory {prefix} kept changing while its turns were erased; try again", key=prefix
    )


def listing(prefix: str) -> BlobOp[list[BlobMeta]]:
    metas: list[BlobMeta] = yield List(prefix)
    return metas


def purge(prefix: str) -> BlobOp[tuple[int, int]]:
    """Delete every object of a generation; returns (objects, bytes)."""
    metas: list[BlobMeta] = yield List(prefix)
    if metas:
        yield Delete(tuple(m.key for m in metas))
    return len(metas), sum(m.size for m in metas)


class _Collect:
    """Takes every turn (of one message, if named); never satisfied."""

    def __init__(self, message_id: str | None = None) -> None:
        self.message_id = message_id
        self.turns: list[Turn] = []
        self.done = False

    def feed(self, turns: list[Turn]) -> bool:
        mid = self.message_id
        self.turns.extend(t for t in turns if mid is None or t.message_id == mid)
        return False


def count_turns(prefix: str) -> BlobOp[int]:
    """Every turn a reader sees in the generation (reads every object; for tests and tools)."""
    consumer, _, _ = yield from read_newest_first(prefix, _Collect)
    assert isinstance(consumer, _Collect)
    return len(consumer.turns)


def message_log(prefix: str, message_id: str) -> BlobOp[list[Turn]]:
    """Every stored turn of one message, replaced ones included, oldest first (reads
    every object: the log of what the message said)."""
    consumer, _, _ = yield from read_newest_first(
        prefix, lambda: _Collect(message_id), superseded=True
    )
    assert isinstance(consumer, _Collect)
    return list(reversed(consumer.turns))
