"""The embedded facade's methods over the REST server: ``AsyncRemoteMemory``.

``_sync_remote.py`` (``RemoteMemory``) is generated from this file by
``scripts/unasync.py``. Methods keep the embedded names, arguments and return
types where REST offers the operation, so an app moves from an embedded store to a
shared server by changing the URL it opens. Every scoped call first checks the scope
against the API key's identity (``GET /v1/me``, read once), so a user key can never
act as another user by mistake; errors arrive as the same :mod:`memstrata.errors`
classes. Appends always carry a message id (made here when the caller gives none),
which makes a retried append idempotent.
"""

from __future__ import annotations

from datetime import datetime
from types import TracebackType
from typing import Any  # unasync: async-only line

import httpx

from memstrata.client import _decode as decode
from memstrata.client._async_conversations import (
    AsyncRemoteConversations,
    AsyncRemoteMessages,
    AsyncRemoteNodes,
    AsyncRemoteRecall,
)
from memstrata.client._async_longterm import (
    AsyncRemoteFacts,
    AsyncRemoteJobs,
    AsyncRemoteLongTerm,
    AsyncRemoteUsers,
)
from memstrata.client._async_memory import AsyncRemoteMemoryMaintenance
from memstrata.client._async_provenance import AsyncRemoteProvenance
from memstrata.client._async_receipts import AsyncRemoteReceipts
from memstrata.client._async_session import (
    NO_MESSAGE_CAP_PARAM,
    NO_TOKEN_LIMIT,
    AsyncSession,
    conversation_path,
    query_params,
)
from memstrata.client._async_state import (
    AsyncRemoteCheckpoints,
    AsyncRemoteIterations,
    AsyncRemotePlans,
    AsyncRemoteSnapshots,
    AsyncRemoteWorking,
)
from memstrata.client._async_usage import AsyncRemoteUsage
from memstrata.client._values import RemoteContext, RemoteHistory
from memstrata.client._wire import Identity, iso_time
from memstrata.domain.context import CompactionResult
from memstrata.domain.history import check_limits
from memstrata.scoped import Scoped
from memstrata.types import Scope

__all__ = ["AsyncRemoteMemory"]


class AsyncRemoteMemory:
    """A memstrata server behind the embedded facade's methods.

    ``AsyncRemoteMemory("http://host:8700", api_key)``, used as a context manager or
    closed with :meth:`close`. ``transport`` is handed to httpx (tests, proxies).
    """

    def __init__(
        self,
        base_url: str,
        api_key: str,
        *,
        timeout: float = 30.0,
        transport: httpx.AsyncBaseTransport | None = None,
    ) -> None:
        self._session = AsyncSession(base_url, api_key, timeout=timeout, transport=transport)
        s = self._session
        self.conversations = AsyncRemoteConversations(s)
        self.messages = AsyncRemoteMessages(s)
        self.recall = AsyncRemoteRecall(s)
        self.facts = AsyncRemoteFacts(s)
        self.longterm = AsyncRemoteLongTerm(s)
        self.working = AsyncRemoteWorking(s)
        self.plans = AsyncRemotePlans(s)
        self.iterations = AsyncRemoteIterations(s)
        self.checkpoints = AsyncRemoteCheckpoints(s)
        self.snapshots = AsyncRemoteSnapshots(s)
        self.jobs = AsyncRemoteJobs(s)
        self.users = AsyncRemoteUsers(s)
        self.nodes = AsyncRemoteNodes(s)
        self.provenance = AsyncRemoteProvenance(s)
        self.memory = AsyncRemoteMemoryMaintenance(s)
        self.usage = AsyncRemoteUsage(s)
        self.receipts = AsyncRemoteReceipts(s)

    @property
    def url(self) -> str:
        return self._session.base_url

    async def identity(self) -> Identity:
        """Who the API key speaks for (read once from ``GET /v1/me``)."""
        return await self._session.identity()

    async def history(
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
        h = await self._session.scoped(scope)
        params = query_params(
            leaf_id=leaf_id,
            max_tokens=NO_TOKEN_LIMIT if max_tokens is None else max_tokens,
            max_messages=NO_MESSAGE_CAP_PARAM if max_messages is None else max_messages,
            model=model,
            before=before,
        )
        path = f"{conversation_path(conversation_id)}/history"
        return await self._session.get(path, decode.history, h, params)

    async def context(
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
        h = await self._session.scoped(scope)
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
        return await self._session.call(
            "POST",
            f"{conversation_path(conversation_id)}/context",
            decode.context,
            headers=h,
            json=body,
            idempotent=not record,
        )

    async def compact(
        self, scope: Scope, conversation_id: str, leaf_id: str | None = None
    ) -> CompactionResult:
        """Compact the branch now and wait for the outcome (``summary`` is the JSON object)."""
        h = await self._session.scoped(scope)
        body = query_params(leaf_id=leaf_id, wait=True)
        return await self._session.call(
            "POST",
            f"{conversation_path(conversation_id)}/compact",
            decode.compaction,
            headers=h,
            json=body,
        )

    def scoped(self, scope: Scope) -> Scoped:
        """This memory bound to ``scope``: the same calls without the scope argument."""
        return Scoped(self, scope)

    # unasync: async-only
    def __await__(self) -> Any:  # a generator (typed loosely: the sync twin lacks it)
        """``await AsyncMemory.open(url, api_key=...)`` works too (opening connects lazily)."""
        return self._opened().__await__()

    async def _opened(self) -> AsyncRemoteMemory:
        return self

    # unasync: end

    async def close(self) -> None:
        """Close the HTTP connections (the server and its data stay)."""
        await self._session.aclose()

    aclose = close

    async def __aenter__(self) -> AsyncRemoteMemory:
        return self

    async def __aexit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        await self.close()
