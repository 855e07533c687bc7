"""What one opened memory holds, shared by its sync and async facades."""

from __future__ import annotations

import threading
from collections.abc import Callable, Mapping, Sequence
from typing import Any, TypeVar

import anyio.to_thread
from pydantic import BaseModel, ValidationError

from memstrata.backends.registry import open_engine
from memstrata.config import Settings
from memstrata.context import ops as context_ops
from memstrata.context.kit import COMPACT_JOB, ContextKit, compact_job
from memstrata.embeddings.port import Embedder
from memstrata.errors import ConfigurationError, InvalidInput, MemstrataError
from memstrata.graph import checkpoints as graph_checkpoints
from memstrata.jobs import ops as jobs_ops
from memstrata.jobs.worker import JobRegistry, LocalWakeup, Wakeup, Worker
from memstrata.llm import LLM, llm_from_settings
from memstrata.locks import DistributedLock, FileLock
from memstrata.nodes import ops as nodes_ops
from memstrata.nodes import service as nodes_service
from memstrata.recall.service import RecallEngine
from memstrata.redact import RedactingLLM, Redactor
from memstrata.runtime import Limits, Runtime
from memstrata.state import ops as state_ops
from memstrata.storage.engine import Engine
from memstrata.storage.plan import Op, Query, read
from memstrata.tokens import get_tokenizer
from memstrata.types import Scope
from memstrata.usage import MeteredLLM, UsageMeter

__all__ = ["Core", "build", "checked_scope"]

M = TypeVar("M", bound=BaseModel)


def build(model: type[M], value: M | Mapping[str, Any] | None, fields: Mapping[str, Any]) -> M:
    """Accept a model instance, a mapping or keyword fields; bad input is InvalidInput."""
    if isinstance(value, model):
        if fields:
            raise InvalidInput(f"pass a {model.__name__} or keyword fields, not both")
        return value
    data = dict(value or {})
    data.update(fields)
    try:
        return model.model_validate(data)
    except ValidationError as exc:
        first = exc.errors()[0]
        where = ".".join(str(p) for p in first["loc"]) or model.__name__
        raise InvalidInput(
            f"{where}: {first['msg']}", field=where, errors=exc.errors(include_url=False)
        ) from None


def _ping() -> Op[None]:
    yield Query("SELECT 1")


def _delete_vectors_of_conversations(ids: Sequence[str]) -> Op[None]:
    from memstrata.vectors.port import delete_for_conversations  # numpy only when used

    yield from delete_for_conversations(ids)


def _delete_vectors_of_messages(conversation_id: str, ids: Sequence[str]) -> Op[None]:
    from memstrata.vectors.port import delete_for_messages

    yield from delete_for_messages(conversation_id, ids)


def _delete_vectors_of_user(tenant: str, user: str) -> Op[None]:
    from memstrata.vectors.port import delete_for_user

    yield from delete_for_user(tenant, user)


def checked_scope(scope: Scope) -> Scope:
    """Every call names its scope; refuse anything else rather than guess an owner."""
    if not isinstance(scope, Scope):
        raise InvalidInput(
            f"scope must be a memstrata.Scope, got {type(scope).__name__}", field="scope"
        )
    return scope


class Core:
    """The engine, runtime, settings and background machinery of one opened memory."""

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
    ) -> None:
        self.engine = engine
        self.rt = runtime
        self.settings = settings
        self.blobs_url = blobs
        self.redis_url = redis
        self.jobs: JobRegistry[Any] = JobRegistry()
        self.wakeup: Wakeup = wakeup or LocalWakeup()
        self.lock: DistributedLock = lock or FileLock(settings.home / "locks")
        self._probes: dict[str, Callable[[], None]] = dict(probes or {})
        self._worker: Worker[Any] | None = None
        self._worker_lock = threading.Lock()
        runtime.cascade.on_conversation_delete(jobs_ops.delete_for_conversations)
        runtime.cascade.on_user_delete(jobs_ops.delete_for_user)
        runtime.cascade.on_conversation_delete(_delete_vectors_of_conversations)
        runtime.cascade.on_messages_delete(_delete_vectors_of_messages)
        runtime.cascade.on_messages_delete(context_ops.forget_messages)
        runtime.cascade.on_user_delete(_delete_vectors_of_user)
        runtime.cascade.on_conversation_delete(nodes_ops.cascade_step(runtime))
        self.jobs.register(nodes_ops.PURGE_JOB, nodes_service.purge_job)
        self.jobs.register(nodes_ops.COMPACT_JOB, nodes_service.compact_job, lease_s=120.0)
        runtime.cascade.on_conversation_delete(state_ops.delete_for_conversations)
        runtime.cascade.on_user_delete(state_ops.delete_for_user)
        runtime.cascade.on_user_delete(graph_checkpoints.delete_for_user)
        self.usage = UsageMeter()
        self.redactor = Redactor.build(
            [k.strip() for k in settings.redact.split(",") if k.strip()], settings.redact_patterns
        )
        self.context = ContextKit(
            llm_from_settings(settings), model=settings.llm_model, wrap=self.wrap_llm
        )
        self.jobs.register(COMPACT_JOB, compact_job)
        self.recall = RecallEngine(self, embedder)
        self.recall.install()
        self._local_worker_started = False
        from memstrata.longterm.service import LongTermKit  # imports the context tiers

        self.longterm = LongTermKit(self)
        self.longterm.install()
        from memstrata.api._async_retention import RETENTION_JOB, retention_job

        self.jobs.register(RETENTION_JOB, retention_job, lease_s=600.0)

    def wrap_llm(self, llm: LLM) -> LLM:
        """A model as features call it: redacted (when configured), then metered."""
        inner: LLM = llm if self.redactor is None else RedactingLLM(llm, self.redactor)
        return MeteredLLM(inner, self.usage, self.rt.tokenizer)

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
        engine = open_engine(url or s.database_url(), sqlite_synchronous=s.sqlite_synchronous)
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

    def check(self) -> dict[str, str]:
        """Ask every configured backend for a trivial answer: ``{name: "ok" | reason}``."""
        results: dict[str, str] = {}
        try:
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

    async def acheck(self) -> dict[str, str]:
        return await anyio.to_thread.run_sync(self.check)

    # -- background work -----------------------------------------------------------------

    def worker(self) -> Worker[Any]:
        """The worker of this process (created on first use; handlers get a sync Memory)."""
        with self._worker_lock:
            if self._worker is None:
                from memstrata.api._sync import Memory

                self._worker = Worker(
                    self.engine,
                    self.jobs,
                    Memory(self),
                    poll_s=self.settings.worker_poll_seconds,
                    wakeup=self.wakeup,
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

    def close(self) -> None:
        self._stop_worker()
        self.engine.close()

    async def aclose(self) -> None:
        await anyio.to_thread.run_sync(self._stop_worker)
        await self.engine.aclose()
