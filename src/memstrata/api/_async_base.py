"""The base of every sub-API (``mem.messages``, ``mem.facts``, ...); ``_sync_base.py`` is
generated from this file by ``scripts/unasync.py``.

A sub-API holds the opened memory's :class:`~memstrata.api.core.Core` and hands sans-IO
operations to its engine: :meth:`_read` in a read transaction, :meth:`_write` in a write
transaction. Methods keep argument handling and scope checks; the logic lives in the
feature's operations.
"""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, ParamSpec, TypeVar

from memstrata.api.core import Core
from memstrata.jobs import ops as jobs_ops
from memstrata.jobs.ops import Job
from memstrata.storage.plan import Op, quick_read, read, write

__all__ = ["AsyncSubAPI"]

P = ParamSpec("P")
T = TypeVar("T")


class AsyncSubAPI:
    """What every sub-API shares: the core, and the two ways to run an operation."""

    def __init__(self, core: Core) -> None:
        self._core = core

    async def _read(self, make: Callable[P, Op[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``make(*args, **kwargs)`` in a read transaction."""
        return await self._core.engine.arun(read(partial(make, *args, **kwargs)))

    async def _quick_read(self, make: Callable[P, Op[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        """:meth:`_read` for a short bounded read (see ``Plan.quick``)."""
        return await self._core.engine.arun(quick_read(partial(make, *args, **kwargs)))

    async def _write(self, make: Callable[P, Op[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``make(*args, **kwargs)`` in a write transaction."""
        return await self._core.engine.arun(write(partial(make, *args, **kwargs)))

    async def _enqueue(
        self,
        kind: str,
        *,
        tenant: str,
        user: str | None,
        agent: str | None,
        key: str | None,
        conversation_id: str | None = None,
        payload: dict[str, Any] | None = None,
        flags: dict[str, bool] | None = None,
        delay_s: float = 0.0,
        max_wait_s: float,
        max_attempts: int = 5,
    ) -> Job:
        """Queue a job (merged into the queued one of the same kind and key), then wake
        a worker."""
        rt = self._core.rt
        job = await self._write(
            jobs_ops.enqueue,
            job_id=rt.make_id(),
            kind=kind,
            key=key,
            tenant=tenant,
            user=user,
            agent=agent,
            conversation_id=conversation_id,
            payload=payload,
            flags=flags,
            delay_s=delay_s,
            max_wait_s=max_wait_s,
            max_attempts=max_attempts,
            now=rt.clock(),
        )
        await self._core.ajob_queued()
        return job
