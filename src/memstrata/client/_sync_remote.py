"""Generated from ``_async_remote.py`` by ``scripts/unasync.py``: do not edit."""

from __future__ import annotations

from datetime import datetime
from types import TracebackType

import httpx

from memstrata.client import _decode as decode
from memstrata.client._sync_conversations import (
    RemoteConversations,
    RemoteMessages,
    RemoteNodes,
    RemoteRecall,
)
from memstrata.client._sync_longterm import (
    RemoteFacts,
    RemoteJobs,
    RemoteLongTerm,
    RemoteUsers,
)
from memstrata.client._sync_memory import RemoteMemoryMaintenance
from memstrata.client._sync_provenance import RemoteProvenance
from memstrata.client._sync_receipts import RemoteReceipts
from memstrata.client._sync_session import (
    NO_MESSAGE_CAP_PARAM,
    NO_TOKEN_LIMIT,
    Session,
    conversation_path,
    query_params,
)
from memstrata.client._sync_state import (
    RemoteCheckpoints,
    RemoteIterations,
    RemotePlans,
    RemoteSnapshots,
    RemoteWorking,
)
from memstrata.client._sync_usage import RemoteUsage
from memstrata.client._values import RemoteContext, RemoteHistory
from memstrata.client._wire import Identity, iso_time
from memstrata.domain.context import CompactionResult
from memstrata.domain.history import check_limits
from memstrata.scoped import Scoped
from memstrata.types import Scope

__all__ = ["RemoteMemory"]


class RemoteMemory:
    """A memstrata server behind the embedded facade's methods.

    ``RemoteMemory("http://host:8700", api_key)``, used as a context manager or
    closed with :meth:`close`. ``transport`` is handed to httpx (tests, proxies).
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        transport: httpx.BaseTransport | None = None,
    ) -> None:
        self._session = Session(base_url, api_key, timeout=timeout, transport=transport)
        s = self._session
        self.conversations = RemoteConversations(s)
        self.messages = RemoteMessages(s)
        self.recall = RemoteRecall(s)
        self.facts = RemoteFacts(s)
        self.longterm = RemoteLongTerm(s)
        self.working = RemoteWorking(s)
        self.plans = RemotePlans(s)
        self.iterations = RemoteIterations(s)
        self.checkpoints = RemoteCheckpoints(s)
        self.snapshots = RemoteSnapshots(s)
        self.jobs = RemoteJobs(s)
        self.users = RemoteUsers(s)
        self.nodes = RemoteNodes(s)
        self.provenance = RemoteProvenance(s)
        self.memory = RemoteMemoryMaintenance(s)
        self.usage = RemoteUsage(s)
        self.receipts = RemoteReceipts(s)

    @property
    def url(self) -> str:
        return self._session.base_url

    def identity(self) -> Identity:
        """Who the API key speaks for (read once from ``GET /v1/me``)."""
        return self._session.identity()

    def history(
        self,
        scope: Scope,
        conversation_id: str,
        leaf_id: str | None = None,
        max_tokens: int | None = 2000,
        max_messages: int | None = 500,
        model: str | None = None,
        *,
        before: str | None = None,
    ) -> RemoteHistory:
        """Token-budgeted history of the branch ending at ``leaf_id`` (default: the active leaf);
        ``before`` ends it just before that message's turn (see the embedded facade)."""
        check_limits(max_tokens, max_messages)
        h = self._session.scoped(scope)
        params = query_params(
            leaf_id=leaf_id,
            max_tokens=NO_TOKEN_LIMIT if max_tokens is None else max_tokens,
            max_messages=NO_MESSAGE_CAP_PARAM if max_messages is None else max_messages,
            model=model,
            before=before,
        )
        path = f"{conversation_path(conversation_id)}/history"
        return self._session.get(path, decode.history, h, params)

    def context(
        self,
        scope: Scope,
        conversation_id: str,
        leaf_id: str | None = None,
        budget: int = 8000,
        query: str | None = None,
        model: str | None = None,
        *,
        task: str | None = None,
        record: bool | None = None,
        as_of: datetime | str | None = None,
        layout: str | None = None,
    ) -> RemoteContext:
        """Messages for the next model call under one token budget, and the report on them.
        ``record=True`` stores a context record and sets ``context_id`` (prompt provenance);
        ``as_of``: the derived tiers as of then; ``layout``: the order of the messages
        (``cache`` or ``classic``), see ``mem.context``."""
        h = self._session.scoped(scope)
        body = query_params(
            leaf_id=leaf_id,
            budget=budget,
            query=query,
            model=model,
            task=task,
            record=record,
            as_of=iso_time(as_of, "as_of"),
            layout=layout,
        )
        # Assembly only reads, but for the branch's prefix fingerprint, which the same context
        # sent again leaves as it was (and a compaction it queues is merged by key): safe to
        # send again; a recorded one is not (a retry would store a second record).
        return self._session.call(
            "POST",
            f"{conversation_path(conversation_id)}/context",
            decode.context,
            headers=h,
            json=body,
            idempotent=not record,
        )

    def compact(
        self, scope: Scope, conversation_id: str, leaf_id: str | None = None
    ) -> CompactionResult:
        """Compact the branch now and wait for the outcome (``summary`` is the JSON object)."""
        h = self._session.scoped(scope)
        body = query_params(leaf_id=leaf_id, wait=True)
        return self._session.call(
            "POST",
            f"{conversation_path(conversation_id)}/compact",
            decode.compaction,
            headers=h,
            json=body,
        )

    def scoped(self, scope: Scope) -> Scoped:
        """This memory bound to ``scope``: the same calls without the scope argument."""
        return Scoped(self, scope)


    def close(self) -> None:
        """Close the HTTP connections (the server and its data stay)."""
        self._session.close()

    close = close

    def __enter__(self) -> RemoteMemory:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
