"""Generated from ``_async_provenance.py`` by ``scripts/unasync.py``: do not edit."""

from __future__ import annotations

from collections.abc import Sequence

from memstrata import provenance as ops
from memstrata.api._sync_base import SubAPI
from memstrata.context import Context
from memstrata.domain import provenance as model
from memstrata.types import Page, Scope
from memstrata.validation import checked_scope as _scope

__all__ = ["Provenance"]


class Provenance(SubAPI):
    """Context records: what entered each prompt, and which replies a fact went into."""

    def record(self, scope: Scope, conversation_id: str, ctx: Context, budget: int) -> str:
        """Store a record of ``ctx`` (an assembly of ``conversation_id``); its id. Usually
        done by ``mem.context(..., record=True)``."""
        rt = self._core.rt
        return self._write(
            ops.record_context, rt, _scope(scope), conversation_id, budget, ctx
        )

    def get(self, scope: Scope, conversation_id: str, message_id: str) -> model.Provenance:
        """What the model saw before the reply ``message_id``: the record linked to it
        (``record`` is None when none is). NotFound when the message is not in ``scope``."""
        return self._read(ops.reply_provenance, _scope(scope), conversation_id, message_id)

    def record_of(
        self, scope: Scope, conversation_id: str, context_id: str
    ) -> model.ContextRecord:
        """A context record by id (NotFound outside ``scope`` or the conversation)."""
        return self._read(ops.get_record, _scope(scope), conversation_id, context_id)

    def fact_usage(
        self, scope: Scope, fact_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> Page[model.FactUse]:
        """The replies whose prompts held ``fact_id``, newest first (a deleted fact's uses
        stay listed: its id is a tombstone in the records)."""
        rt = self._core.rt
        return self._read(
            ops.fact_usage, rt, _scope(scope), fact_id, limit=limit, cursor=cursor
        )

    def fact_use_counts(self, scope: Scope, fact_ids: Sequence[str]) -> dict[str, int]:
        """How many recorded contexts held each fact (ids never injected are absent)."""
        return self._read(ops.fact_use_counts, _scope(scope), list(fact_ids))
