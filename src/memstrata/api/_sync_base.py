"""Generated from ``_async_base.py`` by ``scripts/unasync.py``: do not edit."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import Any, ParamSpec, TypeVar

from memstrata.api.core import Core
from memstrata.jobs import ops as jobs_ops
from memstrata.jobs.ops import Job
from memstrata.storage.plan import Op, quick_read, read, write

__all__ = ["SubAPI"]

P = ParamSpec("P")
T = TypeVar("T")


class SubAPI:
    """What every sub-API shares: the core, and the two ways to run an operation."""

    def __init__(self, core: Core) -> None:
        self._core = core

    def _read(self, make: Callable[P, Op[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``make(*args, **kwargs)`` in a read transaction."""
        return self._core.engine.run(read(partial(make, *args, **kwargs)))

    def _quick_read(self, make: Callable[P, Op[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        """:meth:`_read` for a short bounded read (see ``Plan.quick``)."""
        return self._core.engine.run(quick_read(partial(make, *args, **kwargs)))

    def _write(self, make: Callable[P, Op[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``make(*args, **kwargs)`` in a write transaction."""
        return self._core.engine.run(write(partial(make, *args, **kwargs)))

    def _enqueue(
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
        job = self._write(
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
        self._core.job_queued()
        return job
