"""Generated from ``_async_base.py`` by ``scripts/unasync.py``: do not edit."""

from __future__ import annotations

from collections.abc import Callable
from functools import partial
from typing import ParamSpec, TypeVar

from memstrata.api.core import Core
from memstrata.storage.plan import Op, read, write

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

    def _write(self, make: Callable[P, Op[T]], *args: P.args, **kwargs: P.kwargs) -> T:
        """Run ``make(*args, **kwargs)`` in a write transaction."""
        return self._core.engine.run(write(partial(make, *args, **kwargs)))
