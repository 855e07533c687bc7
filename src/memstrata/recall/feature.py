"""What recall adds to an opened memory: its engine (keyword index at append, the
embedder and vector index, the recall tier of the context) and the cascade steps of the
vectors."""

from __future__ import annotations

from collections.abc import Sequence
from typing import TYPE_CHECKING

from memstrata.recall.service import RecallEngine
from memstrata.storage.plan import Op

if TYPE_CHECKING:
    from memstrata.api.core import Core, JobContext
    from memstrata.context.kit import ContextKit
    from memstrata.jobs.worker import Handler

__all__ = ["install", "install_vectors"]


def install(core: Core, context: ContextKit, embed: Handler[JobContext]) -> RecallEngine:
    """The memory's recall engine, serving its tier in ``context``; ``embed`` (the
    facade's flush) runs the embedding jobs."""
    engine = RecallEngine(core, core.requested_embedder)
    engine.install(context, embed)
    return engine


def install_vectors(core: Core) -> None:
    """Deletes take the stored vectors of what they delete (every embedder's space)."""
    core.rt.cascade.on_conversation_delete(_delete_vectors_of_conversations)
    core.rt.cascade.on_messages_delete(_delete_vectors_of_messages)
    core.rt.cascade.on_user_delete(_delete_vectors_of_user)


def _delete_vectors_of_conversations(ids: Sequence[str]) -> Op[None]:
    from memstrata.vectors.port import delete_for_conversations  # numpy only when used

    yield from delete_for_conversations(ids)


def _delete_vectors_of_messages(conversation_id: str, ids: Sequence[str]) -> Op[None]:
    from memstrata.vectors.port import delete_for_messages

    yield from delete_for_messages(conversation_id, ids)


def _delete_vectors_of_user(tenant: str, user: str) -> Op[None]:
    from memstrata.vectors.port import delete_for_user

    yield from delete_for_user(tenant, user)
