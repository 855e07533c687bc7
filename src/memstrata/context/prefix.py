"""How much of a context repeats the previous context of its branch (its cacheable prefix).

A context's *fingerprint* is a hash chain over its messages: entry ``i`` holds the
tokens of messages ``0..i`` and a hash of their canonical JSON, so two renderings
share a prefix of ``i + 1`` whole messages exactly when their ``i``-th hashes agree.
One fingerprint is kept per conversation (``context_prefixes``, migration 23: a few bytes per
message, no text), so every server process and worker compares against the same
previous context; the row is replaced by each context and goes with the conversation
or with any of its messages.

"The previous context of the same branch" is the stored one when its leaf is on the
branch as far as the new context shows it (the system run, the window, the leaf);
otherwise there is none and ``prefix_tokens`` is 0.

With encryption at rest the chain's hash is keyed with the owner's digest key (a chain
stored before it was keyed matches nothing: that conversation's next context reports 0
and stores a keyed one).
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from json.encoder import encode_basestring
from typing import Any

from memstrata.domain.context import Fingerprint
from memstrata.runtime import Runtime
from memstrata.sealing import content_hash
from memstrata.storage.plan import Exec, Op, Query
from memstrata.storage.sql import placeholders
from memstrata.types import Scope

__all__ = [
    "Fingerprint",
    "canonical",
    "common_prefix",
    "fingerprint",
    "forget_all",
    "forget_conversations",
    "forget_messages",
    "remember",
]


#: ``json.dumps(value, ensure_ascii=False, sort_keys=True)`` without building an encoder
#: per call (that was most of a fingerprint's cost); and the encoder of one string in it.
_ENCODE = json.JSONEncoder(ensure_ascii=False, sort_keys=True).encode
_STRING = encode_basestring


def canonical(message: dict[str, Any]) -> str:
    """A rendered message as the fingerprint hashes it: ``json.dumps(message,
    ensure_ascii=False, sort_keys=True)``, the same text, written directly for the two
    shapes nearly every message has (a text, or a user's one text part)."""
    if len(message) == 2:
        role, content = message.get("role"), message.get("content")
        if type(role) is str:
            if type(content) is str:
                return '{"content": ' + _STRING(content) + ', "role": ' + _STRING(role) + "}"
            if type(content) is list and len(content) == 1:
                part = content[0]
                if (
                    type(part) is dict
                    and len(part) == 2
                    and type(kind := part.get("type")) is str
                    and kind == "text"
                    and type(part.get("text")) is str
                ):
                    return (
                        '{"content": [{"text": '
                        + _STRING(part["text"])
                        + ', "type": "text"}], "role": '
                        + _STRING(role)
                        + "}"
                    )
    return _ENCODE(message)


def fingerprint(
    leaf_id: str,
    encoding: str,
    messages: Sequence[dict[str, Any]],
    tokens: Sequence[int],
    key: bytes | None = None,
) -> Fingerprint:
    """The hash chain of ``messages``; with encryption at rest, ``key`` is the owner's
    digest key (:func:`memstrata.sealing.digest_key`): the chain is stored beside sealed
    text, and an unkeyed hash of a conversation's opening would confirm a guess of it."""
    chain: list[tuple[int, str]] = []
    h = content_hash(key)
    total = 0
    for message, n in zip(messages, tokens, strict=True):
        h.update(canonical(message).encode())
        h.update(b"\x1e")  # a message boundary, so two splits of one text differ
        total += n
        chain.append((total, h.copy().hexdigest()[:16]))
    return Fingerprint(leaf_id, encoding, tuple(chain))


def common_prefix(old: Sequence[Sequence[Any]], new: Sequence[Sequence[Any]]) -> int:
    """The tokens of the longest run of leading messages the two chains share."""
    lo, hi = 0, min(len(old), len(new))
    # The chains agree up to some index and differ from then on: binary search it.
    while lo < hi:
        mid = (lo + hi + 1) // 2
        if old[mid - 1][1] == new[mid - 1][1]:
            lo = mid
        else:
            hi = mid - 1
    return int(new[lo - 1][0]) if lo else 0


def remember(
    rt: Runtime,
    scope: Scope,
    conversation_id: str,
    fp: Fingerprint,
    on_branch: frozenset[str],
) -> Op[int]:
    """Compare ``fp`` with the conversation's previous context and keep it in its place;
    returns the tokens they share (0 with none on this branch or another tokenizer)."""
    rows = yield Query(
        "SELECT leaf_id, encoding, chain FROM context_prefixes "
        "WHERE tenant_id = ? AND conversation_id = ?",
        (scope.tenant, conversation_id),
    )
    shared = 0
    old: list[list[Any]] | None = None
    if rows:
        leaf_id, encoding, chain = rows[0]
        old = json.loads(chain)
        if leaf_id in on_branch and encoding == fp.encoding:
            shared = common_prefix(old, fp.chain)
    if old is not None and rows[0][0] == fp.leaf_id and old == [list(c) for c in fp.chain]:
        return shared  # the same context again: nothing to write
    yield Exec(
        "INSERT INTO context_prefixes "
        "(tenant_id, conversation_id, leaf_id, encoding, chain, updated_at) "
        "VALUES (?, ?, ?, ?, ?, ?) ON CONFLICT (tenant_id, conversation_id) DO UPDATE SET "
        "leaf_id = excluded.leaf_id, encoding = excluded.encoding, chain = excluded.chain, "
        "updated_at = excluded.updated_at",
        (scope.tenant, conversation_id, fp.leaf_id, fp.encoding, fp.dumps(), rt.clock()),
    )
    return shared


def forget_conversations(ids: Sequence[str]) -> Op[None]:
    """Cascade step: the fingerprints of deleted conversations."""
    yield Exec(
        f"DELETE FROM context_prefixes WHERE conversation_id IN ({placeholders(len(ids))})",
        list(ids),
    )


def forget_messages(conversation_id: str, ids: Sequence[str]) -> Op[None]:
    """Cascade step: a conversation that loses messages loses its fingerprint (it hashed them)."""
    del ids
    yield Exec("DELETE FROM context_prefixes WHERE conversation_id = ?", (conversation_id,))


def forget_all() -> Op[int]:
    """Every conversation's fingerprint (``memstrata encrypt --all``: those written while
    encryption was off are unkeyed hashes of now sealed text, and nothing tells them from
    keyed ones). Each conversation's next context reports 0 and keeps a keyed one."""
    return (yield Exec("DELETE FROM context_prefixes", ()))  # type: ignore[no-any-return]
