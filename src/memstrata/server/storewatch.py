"""Watching a SQLite store's files while ``memstrata serve`` runs (finding F19).

WAL mode maps ``<db>-shm`` into memory. Should the file become unwritable while the server
runs (``chattr +i``, a remount read-only), sqlite's next touch of the mapping can kill the
process with SIGBUS, which no Python code can catch or survive. Two things stand between
that and a silent death:

- a watch thread checks the database, ``-wal`` and ``-shm`` with the kernel's own
  ``access()`` every ``serve_store_check_s`` seconds (:func:`memstrata.backends.sqlite.check_store`,
  the check start-up runs); the first failure logs one line naming the path, and the
  process stops as if sent SIGTERM (the server drains and exits cleanly);
- :mod:`faulthandler` is on, so a SIGBUS that comes first still writes ``Fatal Python
  error: Bus error`` and the stacks to stderr before the process dies.
"""

from __future__ import annotations

import faulthandler
import logging
import os
import signal
import threading
from collections.abc import Callable
from pathlib import Path

from memstrata.backends.sqlite import check_store
from memstrata.errors import BackendUnavailable

__all__ = ["StoreWatch"]

log = logging.getLogger("memstrata.server")


class StoreWatch:
    """Check ``db``'s files every ``every_s`` seconds; on the first failure, log it and call
    ``stop`` (default: SIGTERM to this process, which uvicorn answers by shutting down)."""

    def __init__(self, db: Path, every_s: float, stop: Callable[[], None] | None = None) -> None:
        self._db = db
        self._every_s = every_s
        self._stop = stop or (lambda: os.kill(os.getpid(), signal.SIGTERM))
        self._done = threading.Event()
        self._thread = threading.Thread(
            target=self._loop, name="memstrata-store-watch", daemon=True
        )

    def start(self) -> StoreWatch:
        if not faulthandler.is_enabled():
            faulthandler.enable(all_threads=True)
        self._thread.start()
        return self

    def close(self) -> None:
        self._done.set()

    def check(self) -> bool:
        """One look; False (logged, and ``stop`` called) when the store cannot be used."""
        try:
            check_store(self._db)
        except BackendUnavailable as exc:
            log.critical("stopping: %s", exc.message)
            self._done.set()
            self._stop()
            return False
        return True

    def _loop(self) -> None:
        while not self._done.wait(self._every_s):
            if not self.check():
                return
