"""Node memory objects sealed with their owner's data key (encryption at rest).

A node memory's turns live in the blob store, outside the database, so its plans never
pass through the sealed engine: :func:`sealed` wraps a blob operation instead. Each
object it writes is sealed for the conversation's owner and bound to its key (so an
object copied to another key or owner does not open), and each it reads is opened. An
object whose owner's key was destroyed reads as an empty one of its kind (no turns, no
checkpoint): the memory reads as deleted, never as an error.
"""

from __future__ import annotations

from typing import Any, TypeVar

from memstrata.blobs import Blob, BlobMeta, BlobOp, Get, IfMatch, List, Put, PutMode
from memstrata.errors import NotFound, PreconditionFailed
from memstrata.nodes.layout import encode
from memstrata.sealing import Sealer, is_sealed, seal_bytes, unseal_bytes, using

__all__ = ["seal_clear", "sealed"]

T = TypeVar("T")
_TABLE = "node_memory"


def _empty(key: str) -> bytes:
    """An object of ``key``'s kind that holds nothing."""
    if "/ckpt/" in key:
        return encode("checkpoint", {"seq": 0, "chunks": [], "absorbed": []})
    return encode("chunk" if "/chunk/" in key else "segment", {"turns": []})


def sealed(op: BlobOp[T], sealer: Sealer | None, tenant: str, user: str) -> BlobOp[T]:
    """``op`` with its objects sealed as written and opened as read (as is when off,
    except that a sealed object read with encryption off is a KeyringError)."""
    try:
        request = next(op)
        while True:
            if isinstance(request, Put) and sealer is not None:
                with using(sealer):
                    data = seal_bytes(_TABLE, request.key, tenant, user, request.data)
                request = Put(request.key, data, request.mode)
            try:
                reply: Any = yield request
            except Exception as exc:  # NotFound, PreconditionFailed: the op handles them
                request = op.throw(exc)
                continue
            if isinstance(request, Get) and isinstance(reply, Blob):
                with using(sealer):
                    opened = unseal_bytes(_TABLE, request.key, reply.data)
                reply = Blob(_empty(request.key) if opened is None else opened, reply.etag)
            request = op.send(reply)
    except StopIteration as stop:
        return stop.value  # type: ignore[no-any-return]


def seal_clear(
    prefix: str, sealer: Sealer, tenant: str, user: str, *, if_match: bool
) -> BlobOp[int]:
    """Seal every object under ``prefix`` still stored in clear (``memstrata encrypt
    --all``, for objects written before encryption was on); returns how many it sealed.

    Each is rewritten in place, conditionally on its ETag where the store has them: an
    object a writer replaced meanwhile was written sealed already, and one deleted
    meanwhile stays deleted (a missing object or a lost race is skipped, not an error).
    """
    metas: list[BlobMeta] = yield List(prefix)
    sealed_n = 0
    for meta in metas:
        try:
            blob: Blob = yield Get(meta.key)
        except NotFound:
            continue
        if is_sealed(blob.data):
            continue
        with using(sealer):
            data = seal_bytes(_TABLE, meta.key, tenant, user, blob.data)
        mode: PutMode = IfMatch(blob.etag) if if_match and blob.etag else "overwrite"
        try:
            yield Put(meta.key, data, mode)
        except PreconditionFailed:
            continue
        sealed_n += 1
    return sealed_n
