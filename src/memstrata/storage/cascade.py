"""Deletion cascades that later features extend with their own derived data.

A feature that stores data derived from conversations or users (summaries,
recall indexes, facts, jobs, ...) registers a step here; deleting a conversation
or a user runs every registered step inside the same transaction as the base
rows, so nothing derived is left behind and nothing is half-deleted.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from memstrata.storage.plan import Exec, Op, Query
from memstrata.storage.sql import BATCH, placeholders

__all__ = ["Cascade", "ConversationStep", "MessageStep", "UserStep"]

ConversationStep = Callable[[Sequence[str]], Op[None]]
#: Called with a conversation id and the ids of messages about to be deleted from it.
MessageStep = Callable[[str, Sequence[str]], Op[None]]
UserStep = Callable[[str, str], Op[None]]


def _delete_messages(ids: Sequence[str]) -> Op[None]:
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
        self._user: list[UserStep] = []

    def on_conversation_delete(self, step: ConversationStep) -> None:
        self._conversation.append(step)

    def on_user_delete(self, step: UserStep) -> None:
        self._user.append(step)

    def on_messages_delete(self, step: MessageStep) -> None:
        """A step run when some messages of a conversation are deleted (not the whole of it)."""
        self._messages.append(step)

    def delete_messages(self, conversation_id: str, ids: Sequence[str]) -> Op[None]:
        """Delete messages of one conversation and what is derived from them."""
        for start in range(0, len(ids), BATCH):
            batch = list(ids[start : start + BATCH])
            for step in self._messages:
                yield from step(conversation_id, batch)
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
