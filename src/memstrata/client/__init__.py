"""The remote client: the memstrata facade over a shared REST server.

>>> from memstrata.client import connect
>>> mem = connect("http://127.0.0.1:8700", api_key="msk_...")   # doctest: +SKIP

``RemoteMemory`` (sync) and ``AsyncRemoteMemory`` take the same calls as ``Memory``
and ``AsyncMemory`` for what the REST API offers. Needs httpx (the ``server`` extra).
"""

from __future__ import annotations

from typing import Literal, overload

from memstrata.errors import MissingDependency

try:
    import httpx  # noqa: F401  (checked here, so the error names the extra)
except ImportError as exc:  # pragma: no cover - depends on the environment
    raise MissingDependency(
        f"the remote client needs httpx: pip install 'memstrata[server]' ({exc})"
    ) from exc

from memstrata.client._async_remote import AsyncRemoteMemory
from memstrata.client._sync_remote import RemoteMemory
from memstrata.client._values import (
    HistoryMessage,
    RemoteContext,
    RemoteHistory,
    RemoteNodeHistory,
)
from memstrata.client._wire import Identity

__all__ = [
    "AsyncRemoteMemory",
    "HistoryMessage",
    "Identity",
    "RemoteContext",
    "RemoteHistory",
    "RemoteMemory",
    "RemoteNodeHistory",
    "connect",
]


@overload
def connect(
    url: str, *, api_key: str, asynchronous: Literal[False] = False, timeout: float = 30.0
) -> RemoteMemory: ...


@overload
def connect(
    url: str, *, api_key: str, asynchronous: Literal[True], timeout: float = 30.0
) -> AsyncRemoteMemory: ...


def connect(
    url: str, *, api_key: str, asynchronous: bool = False, timeout: float = 30.0
) -> RemoteMemory | AsyncRemoteMemory:
    """A client of the server at ``url`` (``http://host:8700``) acting with ``api_key``.

    Nothing is sent until the first call.
    """
    if asynchronous:
        return AsyncRemoteMemory(url, api_key, timeout=timeout)
    return RemoteMemory(url, api_key, timeout=timeout)
