"""Generated from ``_async_provenance.py`` by ``scripts/unasync.py``: do not edit."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from memstrata.client._sync_session import Session, conversation_path, query_params
from memstrata.client._wire import segment
from memstrata.domain.provenance import FactUse, Provenance
from memstrata.types import Page, Scope
from memstrata.wire.provenance import FactUseOut, ProvenanceOut

__all__ = ["RemoteProvenance"]

_provenance: Callable[[Any], Provenance] = ProvenanceOut.decoder()
_fact_use: Callable[[Any], FactUse] = FactUseOut.decoder()


def _uses(data: dict[str, object]) -> Page[FactUse]:
    items = data["items"]
    assert isinstance(items, list)
    cursor = data.get("next_cursor")
    return Page([_fact_use(i) for i in items], cursor if isinstance(cursor, str) else None)


class RemoteProvenance:
    """What the model saw before a reply, and which replies a fact went into."""

    def __init__(self, session: Session) -> None:
        self._s = session

    def get(self, scope: Scope, conversation_id: str, message_id: str) -> Provenance:
        """The context record linked to the reply (``record`` is None when none is)."""
        h = self._s.scoped(scope)
        path = f"{conversation_path(conversation_id)}/messages/{segment(message_id)}/provenance"
        return self._s.get(path, _provenance, h)

    def fact_usage(
        self, scope: Scope, fact_id: str, *, limit: int | None = None, cursor: str | None = None
    ) -> Page[FactUse]:
        """The replies whose prompts held ``fact_id``, newest first."""
        h = self._s.scoped(scope)
        params = query_params(limit=limit, cursor=cursor)
        return self._s.get(f"/v1/facts/{segment(fact_id)}/usage", _uses, h, params)
