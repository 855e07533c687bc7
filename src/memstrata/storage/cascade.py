"""Deletion cascades that later features extend with their own derived data.

A feature that stores data derived from conversations or users (summaries,
recall indexes, facts, jobs, ...) registers a step here; deleting a conversation
or a user runs every registered step inside the same transaction as the base
rows, so nothing derived is left behind and nothing is half-deleted.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from typing import Any, TypeVar

from memstrata.storage.plan import Exec, Op, Query
from memstrata.storage.sql import BATCH, placeholders

__all__ = [
    "BlobStep",
    "Cascade",
    "ConversationStep",
    "MessageStep",
    "UserStep",
    "counted",
    "deleted_table",
]

T = TypeVar("T")

ConversationStep = Callable[[Sequence[str]], Op[None]]
#: Called with a conversation id and the ids of messages about to be deleted from it.
MessageStep = Callable[[str, Sequence[str]], Op[None]]
UserStep = Callable[[str, str], Op[None]]
#: Called with conversation ids about to be deleted; returns the blob prefixes derived from them
#: (node memories' generations), read before their index rows go.
BlobStep = Callable[[Sequence[str]], Op[list[str]]]

_DELETE = re.compile(r"\s*DELETE\s+FROM\s+\"?([A-Za-z_][A-Za-z0-9_]*)", re.IGNORECASE)


def deleted_table(sql: str) -> str | None:
    """The table a ``DELETE FROM t ...`` statement removes rows from (None for any other)."""
    match = _DELETE.match(sql)
    return match.group(1).lower() if match else None


def counted(op: Op[T]) -> Op[tuple[T, dict[str, int]]]:
    """Run ``op`` and tally the rows its DELETE statements removed, per table.

    Every cascade step (this module's and those features register, today's and later
    ones) deletes through ``Exec("DELETE FROM <table> ...")``, whose result is the row
    count: counting here keeps deletion receipts complete without knowing the tables.
    """
    counts: dict[str, int] = {}
    result: Any = None
    error: Exception | None = None
    while True:
        try:
            if error is not None:
                request = op.throw(error)  # a translated driver error: the operation may catch it
                error = None
            else:
                request = op.send(result)
        except StopIteration as stop:
            return stop.value, counts
        try:
            result = yield request
        except Exception as exc:
            error = exc
            continue
        if isinstance(request, Exec) and isinstance(result, int) and result > 0:
            table = deleted_table(request.sql)
            if table is not None:
                counts[table] = counts.get(table, 0) + result


def _delete_forks(conversation_ids: Sequence[str], head_ids: Sequence[str] = ()) -> Op[None]:
    """The fork rows of deleted messages: every one of the conversations, or (one
    conversation) those of ``head_ids``."""
    marks = placeholders(len(conversation_ids))
    sql = f"DELETE FROM message_forks WHERE conversation_id IN ({marks})"
    if head_ids:
        sql += f" AND head_id IN ({placeholders(len(head_ids))})"
    yield Exec(sql, (*conversation_ids, *head_ids))


def _delete_messages(ids: Sequence[str]) -> Op[None]:
    yield from _delete_forks(ids)
    yield Exec(f"DELETE FROM messages WHERE conversation_id IN ({placeholders(len(ids))})", ids)
    yield Exec(f"DELETE FROM conversations WHERE id IN ({placeholders(len(ids))})", ids)


def _delete_user_rows(tenant: str, user: str) -> Op[None]:
    yield Exec("DELETE FROM api_keys WHERE tenant_id = ? AND user_id = ?", (tenant, user))
    yield Exec("DELETE FROM users WHERE tenant_id = ? AND id = ?", (tenant, user))


class Cascade:
    """Ordered deletion steps: registered (derived) steps first, base rows last."""

    def __init__(self) -> None:
        self._conversation: list[ConversationStep] = []
        self._messages: list[MessageStep] = []
        self._moved: list[MessageStep] = []
        self._user: list[UserStep] = []
        self._blobs: list[BlobStep] = []
        #: Tables that keep ids of deleted things on purpose (tombstones: ids, never content);
        #: the deletion receipts' verification scan does not count them as leftovers.
        self.keeps_ids: set[str] = set()

    def on_conversation_delete(self, step: ConversationStep) -> None:
        self._conversation.append(step)

    def on_user_delete(self, step: UserStep) -> None:
        self._user.append(step)

    def on_messages_delete(self, step: MessageStep) -> None:
        """A step run when some messages of a conversation are deleted (not the whole of it)."""
        self._messages.append(step)

    def on_messages_moved(self, step: MessageStep) -> None:
        """A step run when messages of a conversation stay but their branch changed (a
        message above them was spliced out): what was derived from their old branch goes."""
        self._moved.append(step)

    def moved_messages(self, conversation_id: str, ids: Sequence[str]) -> Op[None]:
        for start in range(0, len(ids), BATCH):
            batch = list(ids[start : start + BATCH])
            for step in self._moved:
                yield from step(conversation_id, batch)

    def on_conversation_blobs(self, step: BlobStep) -> None:
        """A step naming the blob prefixes derived from conversations (for deletion receipts)."""
        self._blobs.append(step)

    def conversation_blobs(self, ids: Sequence[str]) -> Op[list[str]]:
        """The blob prefixes derived from the conversations ``ids`` (read, deletes nothing)."""
        prefixes: list[str] = []
        for start in range(0, len(ids), BATCH):
            batch = list(ids[start : start + BATCH])
            for step in self._blobs:
                prefixes += yield from step(batch)
        return prefixes

    def delete_messages(self, conversation_id: str, ids: Sequence[str]) -> Op[None]:
        """Delete messages of one conversation and what is derived from them."""
        for start in range(0, len(ids), BATCH):
            batch = list(ids[start : start + BATCH])
            for step in self._messages:
                yield from step(conversation_id, batch)
            yield from _delete_forks([conversation_id], batch)
            yield Exec(
                f"DELETE FROM messages WHERE conversation_id = ? AND id IN "
                f"({placeholders(len(batch))})",
                (conversation_id, *batch),
            )

    def delete_conversations(self, ids: Sequence[str]) -> Op[None]:
        for start in range(0, len(ids), BATCH):
            batch = list(ids[start : start + BATCH])
            for step in self._conversation:
                yield from step(batch)
            yield from _delete_messages(batch)

    def delete_user(self, tenant: str, user: str) -> Op[int]:
        """Delete a user's conversations (through the conversation cascade), then the user.

        The caller holds the user's row exclusively already; the conversations are
        locked too, so writes in flight under them finish (and are deleted) first.
        """
        rows = yield Query(
            "SELECT id FROM conversations WHERE tenant_id = ? AND user_id = ?",
            (tenant, user),
            lock="update",
        )
        yield from self.delete_conversations([r[0] for r in rows])
        for step in self._user:
            yield from step(tenant, user)
        yield from _delete_user_rows(tenant, user)
        return len(rows)
