"""The usage ledger: model calls buffered in memory, written to the store in batches.

A model call must not pay for a database write: an embedding made while a message is
appended would double the append's cost. The metered wrappers hand each call to
:meth:`UsageLedger.add`, which only updates a dict; rows reach the store

* when a job ends (the worker flushes before it marks the job done, so a job's
  calls are in the store before the next claim checks its tenant's budget),
* every ``interval_s`` (one second by default) from a background thread, while
  anything is pending,
* when the memory closes, and before a usage report or a budget listing is read.

Embedder calls of one owner, purpose, model and job are summed into one row per
flush (``calls`` says how many); each LLM call keeps a row of its own. A deleted
user's rows are flushed before the deletion (the cascade re-attributes them), and those
noted meanwhile are re-attributed here (:meth:`UsageLedger.forget_user`).

What a crash can lose: the calls of the last ``interval_s`` (and of a job that was running), never
more. A write that fails keeps the rows pending for the next flush (up to
``max_pending`` of them; beyond that the oldest are counted in ``dropped`` and logged).
"""

from __future__ import annotations

import itertools
import logging
import threading
from collections.abc import Callable

from memstrata.storage.engine import Engine
from memstrata.storage.plan import write
from memstrata.usage.scope import CallScope, current_scope
from memstrata.usage.store import ANONYMOUS_USER, UsageRow, insert_rows

__all__ = ["PURPOSE_ALIASES", "UsageLedger"]

log = logging.getLogger("memstrata.usage")

#: Purposes some callers name by an older label (``/metrics`` keeps the label).
PURPOSE_ALIASES = {"longterm": "extraction"}

_Key = tuple[str, str, str, str, str, str, str | None, int]


class UsageLedger:
    """Buffers metered calls of one opened memory and writes them in batches."""

    def __init__(
        self,
        engine: Engine,
        *,
        make_id: Callable[[], str],
        clock: Callable[[], int],
        interval_s: float = 1.0,
        max_pending: int = 100_000,
    ) -> None:
        self._engine = engine
        self._make_id = make_id
        self._clock = clock
        self._interval_s = interval_s
        self._max_pending = max_pending
        self._lock = threading.Lock()
        self._flush_lock = threading.Lock()
        self._pending: dict[_Key, list[int]] = {}
        self._serial = itertools.count(1)
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self.dropped = 0

    def add(
        self,
        *,
        kind: str,
        purpose: str | None,
        model: str,
        ok: bool,
        input_tokens: int,
        output_tokens: int,
        duration_us: int,
        calls: int = 1,
    ) -> None:
        """Note one call (or ``calls`` calls) for the owner bound by ``usage_scope``."""
        scope = current_scope() or CallScope()
        named = purpose or scope.purpose or ("embedding" if kind == "embed" else "chat")
        named = PURPOSE_ALIASES.get(named, named)
        # An LLM call keeps a row of its own; embedder calls of one key are summed.
        serial = next(self._serial) if kind == "llm" else 0
        key: _Key = (
            scope.tenant,
            scope.user,
            scope.agent,
            named,
            model,
            kind,
            scope.job_id,
            serial,
        )
        now = self._clock()
        with self._lock:
            acc = self._pending.get(key)
            if acc is None:
                if len(self._pending) >= self._max_pending:
                    self._pending.pop(next(iter(self._pending)))
                    self.dropped += 1
                    log.warning("usage: pending rows over %d; oldest dropped", self._max_pending)
                self._pending[key] = [
                    calls,
                    0 if ok else calls,
                    input_tokens,
                    output_tokens,
                    duration_us,
                    now,
                ]
            else:
                acc[0] += calls
                acc[1] += 0 if ok else calls
                acc[2] += input_tokens
                acc[3] += output_tokens
                acc[4] += duration_us
                acc[5] = now
        self._start()

    def forget_user(self, tenant: str, user: str) -> None:
        """Re-attribute the pending rows of a deleted user, as the cascade did to its
        stored rows (calls noted between the last flush and the deletion)."""
        with self._lock:
            for key in [k for k in self._pending if k[0] == tenant and k[1] == user]:
                acc = self._pending.pop(key)
                moved: _Key = (tenant, ANONYMOUS_USER, "", *key[3:])
                mine = self._pending.get(moved)
                if mine is None:
                    self._pending[moved] = acc
                else:
                    for i in range(5):
                        mine[i] += acc[i]
                    mine[5] = max(mine[5], acc[5])

    @property
    def pending(self) -> int:
        with self._lock:
            return len(self._pending)

    def flush(self) -> int:
        """Write what is pending; returns the rows written (0 when the write failed: the
        rows stay pending)."""
        with self._flush_lock:
            with self._lock:
                taken, self._pending = self._pending, {}
            if not taken:
                return 0
            rows = [
                UsageRow(
                    tenant=k[0],
                    user=k[1],
                    agent=k[2],
                    purpose=k[3],
                    model=k[4],
                    kind=k[5],
                    calls=v[0],
                    errors=v[1],
                    input_tokens=v[2],
                    output_tokens=v[3],
                    duration_us=v[4],
                    at=v[5],
                    job_id=k[6],
                )
                for k, v in taken.items()
            ]
            ids = [self._make_id() for _ in rows]
            try:
                if self._engine.closed:
                    raise RuntimeError("the store is closed")
                self._engine.run(write(lambda: insert_rows(rows, ids)))
            except Exception:
                log.warning(
                    "usage: could not write %d row(s); kept for later", len(rows), exc_info=True
                )
                self._restore(taken)
                return 0
            return len(rows)

    def _restore(self, taken: dict[_Key, list[int]]) -> None:
        with self._lock:
            for key, acc in taken.items():
                mine = self._pending.get(key)
                if mine is None:
                    self._pending[key] = acc
                else:
                    for i in range(5):
                        mine[i] += acc[i]
            while len(self._pending) > self._max_pending:
                self._pending.pop(next(iter(self._pending)))
                self.dropped += 1

    # -- the background flusher ------------------------------------------------------------

    def _start(self) -> None:
        if self._thread is not None or self._interval_s <= 0 or self._stop.is_set():
            return
        with self._lock:  # two first calls at once: one thread
            thread = self._thread
            if thread is None:
                thread = threading.Thread(target=self._loop, name="memstrata-usage", daemon=True)
                self._thread = thread
                thread.start()

    def _loop(self) -> None:
        while not self._stop.wait(self._interval_s):
            if self._engine.closed:
                return
            if self.pending:
                self.flush()

    def close(self) -> None:
        """Stop the background flusher and write what is pending (before the store closes)."""
        self._stop.set()
        thread = self._thread
        if thread is not None:
            thread.join()
        self.flush()
