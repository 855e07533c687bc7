"""What one opened memory holds, shared by its sync and async facades."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import TYPE_CHECKING, TypeAlias

import anyio.to_thread

from memstrata.api.features import FEATURES, Feature, Kits, need
from memstrata.backends.registry import open_blob_store, open_engine
from memstrata.blobs import BlobStore
from memstrata.config import Settings
from memstrata.embeddings.port import Embedder
from memstrata.errors import ConfigurationError, MemstrataError
from memstrata.jobs.worker import JobRegistry, LocalWakeup, Wakeup, Worker
from memstrata.keyring import open_sealer
from memstrata.llm import LLM
from memstrata.locks import DistributedLock, FileLock
from memstrata.redact import RedactingLLM, Redactor
from memstrata.runtime import Limits, Runtime
from memstrata.storage.engine import Engine, Pingable
from memstrata.storage.plan import Op, Query, read
from memstrata.storage.sealed import SealedEngine
from memstrata.tokens import get_tokenizer
from memstrata.usage import MeteredLLM, UsageLedger, UsageMeter
from memstrata.validation import build, checked_scope

if TYPE_CHECKING:
    from memstrata.api._sync import Memory
    from memstrata.context.kit import ContextKit
    from memstrata.longterm.service import LongTermKit
    from memstrata.nodes.service import NodesKit
    from memstrata.provenance.feature import FactUsage
    from memstrata.recall.service import RecallEngine

    #: What a job handler gets: the sync facade over the core whose worker runs the job
    #: (``handler(job, memory)``, the contract of ``mem.jobs.register``).
    JobContext: TypeAlias = Memory

# ``build`` and ``checked_scope`` live in memstrata.validation; imported here for old callers.
__all__ = ["Core", "JobContext", "build", "checked_scope"]


def _ping() -> Op[None]:
    yield Query("SELECT 1")


class Core:
    """The engine, runtime, settings and background machinery of one opened memory; the
    features (:data:`~memstrata.api.features.FEATURES`) install the rest."""

    def __init__(
        self,
        engine: Engine,
        runtime: Runtime,
        settings: Settings,
        *,
        lock: DistributedLock | None = None,
        wakeup: Wakeup | None = None,
        blobs: str | None = None,
        redis: str | None = None,
        probes: Mapping[str, Callable[[], None]] | None = None,
        embedder: Embedder | None = None,
        features: Sequence[Feature] | None = None,
    ) -> None:
        # Encryption at rest: every plan runs with the keyring's sealer active (a missing or
        # wrong master key stops the open here, before anything is read or written).
        self.sealer = open_sealer(settings)
        if self.sealer is not None:
            engine = SealedEngine(engine, self.sealer)
        self.engine = engine
        self.rt = runtime
        self.settings = settings
        self.blobs_url = blobs
        self.redis_url = redis
        self.jobs: JobRegistry[JobContext] = JobRegistry()
        self.wakeup: Wakeup = wakeup or LocalWakeup()
        self.lock: DistributedLock = lock or FileLock(settings.home / "locks")
        self._probes: dict[str, Callable[[], None]] = dict(probes or {})
        self._worker: Worker[JobContext] | None = None
        self._job_context: Callable[[Core], JobContext] | None = None
        self._worker_lock = threading.Lock()
        self.requested_embedder = embedder  # None: the recall feature reads the settings
        # Model calls reach the store through the ledger, in batches (memstrata.usage).
        self.usage_ledger = UsageLedger(
            engine,
            make_id=runtime.make_id,
            clock=runtime.clock,
            interval_s=settings.usage_flush_seconds,
        )
        self.usage = UsageMeter(self.usage_ledger, runtime.tokenizer)
        self.redactor = Redactor.build(
            [k.strip() for k in settings.redact.split(",") if k.strip()], settings.redact_patterns
        )
        self._local_worker_started = False
        self.features = tuple(FEATURES if features is None else features)
        kits = Kits()
        for feature in self.features:
            kits = feature.install(self, kits)
        #: The kits the features returned (:class:`~memstrata.api.features.Kits`).
        self.kits = kits

    # -- the features' kits --------------------------------------------------------------

    @property
    def context(self) -> ContextKit:
        """The context feature's kit: tier providers, policies, the model."""
        return need(self.kits.context, "context")

    @property
    def recall(self) -> RecallEngine:
        """The recall feature's engine: embedder, vector index, the recall tier."""
        return need(self.kits.recall, "recall")

    @property
    def longterm(self) -> LongTermKit:
        """The long-term feature's kit: capture, extraction settings, its tiers."""
        return need(self.kits.longterm, "longterm")

    @property
    def nodes(self) -> NodesKit:
        """The node-memory feature's kit: its blob store."""
        return need(self.kits.nodes, "nodes")

    @property
    def fact_usage(self) -> FactUsage | None:
        """How many recorded contexts held each fact (None without provenance: memory
        health then reports usage as unknown)."""
        return self.kits.fact_usage

    def wrap_llm(self, llm: LLM) -> LLM:
        """A model as features call it: redacted (when configured), then metered."""
        inner: LLM = llm if self.redactor is None else RedactingLLM(llm, self.redactor)
        return MeteredLLM(inner, self.usage, self.rt.tokenizer, model=self.settings.llm_model)

    @classmethod
    def open(
        cls,
        url: str | None = None,
        *,
        blobs: str | None = None,
        redis: str | None = None,
        settings: Settings | None = None,
        embedder: Embedder | None = None,
    ) -> Core:
        s = settings or Settings()
        redis = redis or s.redis
        probes: dict[str, Callable[[], None]] = {}
        lock: DistributedLock | None = None
        wakeup: Wakeup | None = None
        if redis is not None:
            if not redis.startswith(("redis://", "rediss://", "unix://")):
                raise ConfigurationError(
                    f"redis URL must start with redis:// or rediss://, got {redis!r}"
                )
            from memstrata.backends import redis as redis_backend

            client = redis_backend.connect(redis)
            lock = redis_backend.RedisLock(client)
            wakeup = redis_backend.RedisWakeup(client)
            probes["redis"] = lambda: redis_backend.ping(client)
        engine = open_engine(
            url or s.database_url(),
            sqlite_synchronous=s.sqlite_synchronous,
            postgres_wait_s=s.postgres_wait_s,
        )
        if lock is None and engine.dialect == "postgres":
            from memstrata.backends.postgres import PostgresEngine, PostgresLock

            assert isinstance(engine, PostgresEngine)
            lock = PostgresLock(engine)
        rt = Runtime(
            tokenizer=get_tokenizer(s.token_encoding),
            limits=Limits(max_content_bytes=s.max_content_bytes),
        )
        return cls(
            engine,
            rt,
            s,
            lock=lock,
            wakeup=wakeup,
            blobs=blobs,
            redis=redis,
            probes=probes,
            embedder=embedder,
        )

    # -- readiness -----------------------------------------------------------------------

    def check(self, timeout_s: float | None = None) -> dict[str, str]:
        """Ask every configured backend for a trivial answer: ``{name: "ok" | reason}``;
        past ``timeout_s`` the answer is that the backends did not answer in time (the
        probe thread is left to finish on its own)."""
        if timeout_s is None:
            return self._check()
        found: dict[str, str] = {}
        probe = threading.Thread(target=lambda: found.update(self._check()), daemon=True)
        probe.start()
        probe.join(timeout_s)
        if probe.is_alive():
            return {self.engine.dialect: f"no answer within {timeout_s:g} s"}
        return found

    def _check(self) -> dict[str, str]:
        results: dict[str, str] = {}
        try:
            if isinstance(self.engine, Pingable):  # connects directly, with a short timeout
                self.engine.ping()
            else:
                self.engine.run(read(_ping))
            results[self.engine.dialect] = "ok"
        except MemstrataError as exc:
            results[self.engine.dialect] = exc.message
        for name, probe in self._probes.items():
            try:
                probe()
                results[name] = "ok"
            except MemstrataError as exc:
                results[name] = exc.message
        return results

    async def acheck(self, timeout_s: float | None = None) -> dict[str, str]:
        """:meth:`check` from async code; past ``timeout_s`` the answer is that the
        backends did not answer in time (the probe thread is left to finish on its own)."""
        if timeout_s is None:
            return await anyio.to_thread.run_sync(self._check)
        with anyio.move_on_after(timeout_s):
            return await anyio.to_thread.run_sync(self._check, abandon_on_cancel=True)
        return {self.engine.dialect: f"no answer within {timeout_s:g} s"}

    def schema_version(self) -> int:
        return self.engine.schema_version()

    async def aschema_version(self) -> int:
        return await anyio.to_thread.run_sync(self.engine.schema_version)

    def migrate(self) -> list[int]:
        return self.engine.migrate()

    async def amigrate(self) -> list[int]:
        return await anyio.to_thread.run_sync(self.engine.migrate)

    def open_blob_store(self) -> BlobStore:
        """A blob store at ``blobs=`` (or the settings' location): features reach storage
        backends through the core, never by importing them."""
        return open_blob_store(self.blobs_url or self.settings.blobs_url(), self.settings)

    # -- background work -----------------------------------------------------------------

    def serve_jobs_with(self, facade: Callable[[Core], JobContext]) -> None:
        """Say how to build what job handlers get (the sync facade): the facades built over
        this core do (this module never imports the facade built over it)."""
        self._job_context = facade

    def worker(self) -> Worker[JobContext]:
        """The worker of this process (created on first use; handlers get a sync Memory)."""
        with self._worker_lock:
            if self._worker is None:
                if self._job_context is None:
                    raise ConfigurationError(
                        "no facade over this memory: open it with Memory or AsyncMemory"
                    )
                self._worker = Worker(
                    self.engine,
                    self.jobs,
                    self._job_context(self),
                    poll_s=self.settings.worker_poll_seconds,
                    wakeup=self.wakeup,
                    after_job=self.usage_ledger.flush,
                )
            return self._worker

    def _local_worker_wanted(self) -> bool:
        mode = self.settings.worker
        return mode == "thread" or (mode == "auto" and self.engine.dialect == "sqlite")

    def job_queued(self) -> None:
        """Wake workers; on the embedded default, start the in-process worker thread."""
        if self._local_worker_wanted():
            self.worker().start(threads=1)
        self.wakeup.notify()

    def start_local_worker(self) -> None:
        """Start the in-process worker (once) when this memory runs one. Called from inside a
        transaction that queued a job (not committed yet: the worker's poll finds it), and at
        the start of a long-running process (serve, mcp), so jobs an earlier process left
        queued (a killed server, a CLI command) run without waiting for a new one."""
        if self._local_worker_started:
            return
        self._local_worker_started = True
        if self._local_worker_wanted():
            self.worker().start(threads=1)

    async def ajob_queued(self) -> None:
        # A Redis wake-up is a network call: keep it off the event loop.
        await anyio.to_thread.run_sync(self.job_queued)

    def run_pending(self, kinds: Sequence[str] | None = None, max_jobs: int | None = None) -> int:
        return self.worker().run_pending(kinds, max_jobs)

    async def arun_pending(
        self, kinds: Sequence[str] | None = None, max_jobs: int | None = None
    ) -> int:
        return await anyio.to_thread.run_sync(self.run_pending, kinds, max_jobs)

    def _stop_worker(self) -> None:
        if self._worker is not None:
            self._worker.stop()
        self.wakeup.close()
        self.usage_ledger.close()  # the calls still buffered, before the store closes

    def flush_usage(self) -> int:
        """Write the buffered usage rows now (a report then sees this process's calls)."""
        return self.usage_ledger.flush()

    async def aflush_usage(self) -> int:
        return await anyio.to_thread.run_sync(self.usage_ledger.flush)

    def close(self) -> None:
        self._stop_worker()
        self.engine.close()

    async def aclose(self) -> None:
        await anyio.to_thread.run_sync(self._stop_worker)
        await self.engine.aclose()
