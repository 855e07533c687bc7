"""The blob store port: a handful of object-store calls, sync and async.

Features never talk to a store directly: they write sans-IO operations that
yield :class:`BlobRequest` objects (``Get``, ``Put``, ``List``, ``Delete``) and
receive their results, like the SQL operations of :mod:`memstrata.storage.plan`.
:class:`Blobs` runs such an operation against a :class:`BlobStore`, blocking or
on the event loop, and counts requests and bytes (benchmarks report them).

Writes that must not lose concurrent updates use ``Put(mode="create")``
(create-if-absent, on every store) or ``Put(mode=IfMatch(etag))`` where
``store.capabilities.if_match`` says the store can (S3 and memory do; the local
file store does not). A store says what it can do; it never raises
``NotImplementedError`` for an optional ability.

Errors are memstrata errors: a missing object is :class:`~memstrata.errors.NotFound`,
a lost create or if-match race :class:`~memstrata.errors.PreconditionFailed`, an
unreachable store :class:`~memstrata.errors.BackendUnavailable`.
"""

from __future__ import annotations

import threading
from collections.abc import Generator, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, TypeVar

from memstrata import steps
from memstrata.errors import MemstrataError

__all__ = [
    "Blob",
    "BlobCapabilities",
    "BlobMeta",
    "BlobOp",
    "BlobRequest",
    "BlobStore",
    "Blobs",
    "Delete",
    "Get",
    "IfMatch",
    "List",
    "Put",
]

T = TypeVar("T")


@dataclass(frozen=True, slots=True)
class BlobCapabilities:
    """Optional abilities of a store. Create-if-absent is not listed: every store has it."""

    if_match: bool  # conditional overwrite by ETag


@dataclass(frozen=True, slots=True)
class Blob:
    data: bytes
    etag: str | None


@dataclass(frozen=True, slots=True)
class BlobMeta:
    key: str
    size: int
    etag: str | None
    last_modified: float  # seconds since the epoch


@dataclass(frozen=True, slots=True)
class IfMatch:
    """Overwrite only if the stored object still has this ETag."""

    etag: str


PutMode = Literal["overwrite", "create"] | IfMatch


@dataclass(frozen=True, slots=True)
class Get:
    key: str


@dataclass(frozen=True, slots=True)
class Put:
    key: str
    data: bytes
    mode: PutMode = "overwrite"


@dataclass(frozen=True, slots=True)
class List:
    prefix: str


@dataclass(frozen=True, slots=True)
class Delete:
    """Delete keys; a key already gone is not an error (deletion is idempotent)."""

    keys: tuple[str, ...]


BlobRequest = Get | Put | List | Delete
BlobOp = Generator[BlobRequest, Any, T]


class BlobStore(Protocol):
    """An object store: keys are ``/``-separated relative paths."""

    url: str
    capabilities: BlobCapabilities

    def get(self, key: str) -> Blob: ...

    def put(self, key: str, data: bytes, mode: PutMode = "overwrite") -> str | None:
        """Store ``data``; returns the new ETag when the store gives one."""
        ...

    def list_prefix(self, prefix: str) -> list[BlobMeta]:
        """Every object whose key starts with ``prefix`` (a folder: end it with ``/``)."""
        ...

    def delete(self, keys: Sequence[str]) -> None: ...

    async def aget(self, key: str) -> Blob: ...

    async def aput(self, key: str, data: bytes, mode: PutMode = "overwrite") -> str | None: ...

    async def alist_prefix(self, prefix: str) -> list[BlobMeta]: ...

    async def adelete(self, keys: Sequence[str]) -> None: ...


class Blobs:
    """Runs blob operations against one store and counts what they cost."""

    def __init__(self, store: BlobStore) -> None:
        self.store = store
        self._lock = threading.Lock()
        self.requests = 0
        self.bytes_read = 0
        self.bytes_written = 0

    @property
    def capabilities(self) -> BlobCapabilities:
        return self.store.capabilities

    def counters(self) -> tuple[int, int, int]:
        """``(requests, bytes_read, bytes_written)`` so far (take differences around a call)."""
        with self._lock:
            return self.requests, self.bytes_read, self.bytes_written

    def _count(self, request: BlobRequest, result: Any) -> None:
        with self._lock:
            self.requests += 1
            if isinstance(request, Get):
                self.bytes_read += len(result.data)
            elif isinstance(request, Put):
                self.bytes_written += len(request.data)

    def execute(self, request: BlobRequest) -> Any:
        """One request against the store, uncounted (tests step an operation by hand)."""
        s = self.store
        if isinstance(request, Get):
            return s.get(request.key)
        if isinstance(request, Put):
            return s.put(request.key, request.data, request.mode)
        if isinstance(request, List):
            return s.list_prefix(request.prefix)
        return s.delete(request.keys)

    async def _aexecute(self, request: BlobRequest) -> Any:
        s = self.store
        if isinstance(request, Get):
            return await s.aget(request.key)
        if isinstance(request, Put):
            return await s.aput(request.key, request.data, request.mode)
        if isinstance(request, List):
            return await s.alist_prefix(request.prefix)
        return await s.adelete(request.keys)

    def run(self, op: BlobOp[T]) -> T:
        """Drive ``op`` with blocking calls; a store error is thrown into the operation."""

        def execute(request: BlobRequest) -> Any:
            result = self.execute(request)
            self._count(request, result)
            return result

        return steps.drive(op, execute, _store_errors)

    async def arun(self, op: BlobOp[T]) -> T:
        """Drive ``op`` on the event loop (the store's own async calls)."""

        async def execute(request: BlobRequest) -> Any:
            result = await self._aexecute(request)
            self._count(request, result)
            return result

        return await steps.adrive(op, execute, _store_errors)


def _store_errors(exc: Exception) -> BaseException:
    """A store's error goes into the operation (it may recover); anything else propagates."""
    if isinstance(exc, MemstrataError):
        return exc
    raise exc
