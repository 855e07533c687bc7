"""Cascade steps: what provenance forgets when conversations, messages or a user go.

* a deleted conversation takes its records with it; in other records (a recalled
  message of it) its messages stay as tombstones: the id, marked deleted;
* a deleted message takes the record linked to it as a reply (there is no reply left
  to explain) and is a tombstone in the records that injected it (a record assembled
  for it as the leaf keeps no leaf);
* a deleted user takes every record of theirs.

Facts need no step: a record holds a fact's id and version, never its text, and a
deleted fact reads as a tombstone (see :mod:`memstrata.provenance.read`).
"""

from __future__ import annotations

from collections.abc import Sequence

from memstrata.storage.plan import Exec, Op
from memstrata.storage.sql import placeholders

__all__ = ["forget_conversations", "forget_messages", "forget_user"]


def forget_conversations(ids: Sequence[str]) -> Op[None]:
    marks = placeholders(len(ids))
    yield Exec(
        "DELETE FROM context_record_items WHERE context_id IN "
        f"(SELECT id FROM context_records WHERE conversation_id IN ({marks}))",
        ids,
    )
    yield Exec(f"DELETE FROM context_records WHERE conversation_id IN ({marks})", ids)
    yield Exec(
        "UPDATE context_record_items SET deleted = 1 WHERE kind = 'message' "
        f"AND conversation_id IN ({marks})",
        ids,
    )


def forget_messages(conversation_id: str, ids: Sequence[str]) -> Op[None]:
    marks = placeholders(len(ids))
    replies = f"SELECT id FROM context_records WHERE conversation_id = ? AND reply_id IN ({marks})"
    yield Exec(
        f"DELETE FROM context_record_items WHERE context_id IN ({replies})",
        (conversation_id, *ids),
    )
    yield Exec(
        f"DELETE FROM context_records WHERE conversation_id = ? AND reply_id IN ({marks})",
        (conversation_id, *ids),
    )
    yield Exec(
        "UPDATE context_record_items SET deleted = 1 WHERE kind = 'message' "
        f"AND conversation_id = ? AND item_id IN ({marks})",
        (conversation_id, *ids),
    )
    # A record assembled for a deleted leaf keeps it as a tombstone item, not as its leaf.
    yield Exec(
        f"UPDATE context_records SET leaf_id = NULL WHERE conversation_id = ? AND leaf_id IN ({marks})",
        (conversation_id, *ids),
    )


def forget_user(tenant: str, user: str) -> Op[None]:
    yield Exec(
        "DELETE FROM context_record_items WHERE context_id IN "
        "(SELECT id FROM context_records WHERE tenant_id = ? AND user_id = ?)",
        (tenant, user),
    )
    yield Exec("DELETE FROM context_records WHERE tenant_id = ? AND user_id = ?", (tenant, user))
