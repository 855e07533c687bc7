"""A LangGraph checkpointer on memstrata (``mem.graphs``), sync and async.

:class:`MemstrataSaver` (over a :class:`~memstrata.Memory`) and
:class:`AsyncMemstrataSaver` (over an :class:`~memstrata.AsyncMemory`) keep a
graph's checkpoints and pending writes per scope and thread, so a compiled graph
resumes from them in another process, on SQLite or PostgreSQL. Both serve the sync
and the async interface: each builds the other facade on the same store.

Checkpoints are stored whole (LangGraph's own serialisation), with their parent, so
a thread is a tree: a checkpoint resumed from an earlier one is a fork. When the
state has a ``messages`` channel (``messages_key``) holding LangChain messages, each
root checkpoint's list is also written into a memstrata conversation
(``conversation_id(thread_id)``; see :mod:`memstrata.integrations.langgraph.mirror`),
where forks become branches; ``mem.history``, ``mem.context`` and recall then see
what the graph said. ``mirror_messages=False`` turns that off.

Metadata filters of :meth:`list` compare top-level metadata values for equality,
as LangGraph's own savers do.
"""

from __future__ import annotations

import random
from collections.abc import AsyncIterator, Iterator, Sequence
from typing import Any

from langchain_core.runnables import RunnableConfig
from langgraph.checkpoint.base import (
    WRITES_IDX_MAP,
    BaseCheckpointSaver,
    ChannelVersions,
    Checkpoint,
    CheckpointMetadata,
    CheckpointTuple,
    get_checkpoint_id,
    get_serializable_checkpoint_metadata,
)
from langgraph.checkpoint.serde.base import SerializerProtocol

from memstrata.api import AsyncMemory, Memory
from memstrata.errors import InvalidInput
from memstrata.graph.checkpoints import GraphCheckpoint, GraphWrite
from memstrata.integrations.langgraph._steps import Steps, call, run_async, run_sync
from memstrata.integrations.langgraph.mirror import mirror_messages
from memstrata.integrations.threads import conversation_id_for
from memstrata.types import Page, Scope

__all__ = ["AsyncMemstrataSaver", "MemstrataSaver"]

_PAGE = 100


def _where(config: RunnableConfig) -> tuple[str, str, str | None]:
    conf = config["configurable"]
    return str(conf["thread_id"]), conf.get("checkpoint_ns", "") or "", get_checkpoint_id(config)


def _config(thread_id: str, ns: str, checkpoint_id: str) -> RunnableConfig:
    return {
        "configurable": {
            "thread_id": thread_id,
            "checkpoint_ns": ns,
            "checkpoint_id": checkpoint_id,
        }
    }


def _matches(metadata: CheckpointMetadata, wanted: dict[str, Any] | None) -> bool:
    return not wanted or all(metadata.get(k) == v for k, v in wanted.items())


def _take(
    found: list[CheckpointTuple], left: int | None
) -> tuple[list[CheckpointTuple], int | None]:
    """The first ``left`` of ``found`` (all when None), and how many are still wanted."""
    if left is None:
        return found, None
    return found[:left], max(0, left - len(found))


class _Saver(BaseCheckpointSaver[str]):
    """The checkpointer: each method is a step run on the sync or the async facade."""

    def __init__(
        self,
        memory: Memory,
        async_memory: AsyncMemory,
        scope: Scope,
        *,
        serde: SerializerProtocol | None = None,
        mirror_messages: bool = True,
        messages_key: str = "messages",
    ) -> None:
        super().__init__(serde=serde)
        Scope(scope.tenant, scope.user, scope.agent)  # a Scope, with valid names
        self._mem = memory
        self._amem = async_memory
        self.scope = scope
        self.mirror_messages = mirror_messages
        self.messages_key = messages_key

    def conversation_id(self, thread_id: str) -> str:
        """The memstrata conversation that mirrors the thread's messages."""
        return conversation_id_for(self.scope, str(thread_id))

    # -- conversion --

    def _tuple(self, row: GraphCheckpoint) -> CheckpointTuple:
        parent = (
            None
            if row.parent_id is None
            else _config(row.thread_id, row.checkpoint_ns, row.parent_id)
        )
        return CheckpointTuple(
            config=_config(row.thread_id, row.checkpoint_ns, row.checkpoint_id),
            checkpoint=self.serde.loads_typed((row.type, row.checkpoint)),
            metadata=self.serde.loads_typed((row.metadata_type, row.metadata)),
            parent_config=parent,
            pending_writes=[
                (w.task_id, w.channel, self.serde.loads_typed((w.type, w.value)))
                for w in row.writes
            ],
        )

    # -- steps --

    def _get(self, config: RunnableConfig) -> Steps[CheckpointTuple | None]:
        thread_id, ns, checkpoint_id = _where(config)
        row = yield call(
            lambda m: m.graphs.get_checkpoint, self.scope, thread_id, ns, checkpoint_id
        )
        return None if row is None else self._tuple(row)

    def _page(
        self,
        config: RunnableConfig | None,
        before: RunnableConfig | None,
        cursor: str | None,
    ) -> Steps[Page[GraphCheckpoint]]:
        conf = (config or {}).get("configurable", {})
        thread_id = conf.get("thread_id")
        page: Page[GraphCheckpoint] = yield call(
            lambda m: m.graphs.list_checkpoints,
            self.scope,
            thread_id=None if thread_id is None else str(thread_id),
            checkpoint_ns=conf.get("checkpoint_ns"),
            checkpoint_id=conf.get("checkpoint_id"),
            before=None if before is None else get_checkpoint_id(before),
            limit=_PAGE,
            cursor=cursor,
        )
        return page

    def _put(
        self, config: RunnableConfig, checkpoint: Checkpoint, metadata: CheckpointMetadata
    ) -> Steps[RunnableConfig]:
        thread_id, ns, parent_id = _where(config)
        stored_meta = get_serializable_checkpoint_metadata(config, metadata)
        type_, blob = self.serde.dumps_typed(checkpoint)
        meta_type, meta_blob = self.serde.dumps_typed(stored_meta)
        run_id = stored_meta.get("run_id")
        yield call(
            lambda m: m.graphs.put_checkpoint,
            self.scope,
            thread_id=thread_id,
            checkpoint_ns=ns,
            checkpoint_id=checkpoint["id"],
            parent_id=parent_id,
            run_id=None if run_id is None else str(run_id),
            type=type_,
            checkpoint=blob,
            metadata_type=meta_type,
            metadata=meta_blob,
        )
        messages = checkpoint.get("channel_values", {}).get(self.messages_key)
        if self.mirror_messages and ns == "" and isinstance(messages, list):
            yield from mirror_messages(self.scope, thread_id, messages)
        return _config(thread_id, ns, checkpoint["id"])

    def _put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str,
    ) -> Steps[None]:
        thread_id, ns, checkpoint_id = _where(config)
        rows = []
        for idx, (channel, value) in enumerate(writes):
            type_, blob = self.serde.dumps_typed(value)
            rows.append(
                GraphWrite(
                    task_id, WRITES_IDX_MAP.get(channel, idx), channel, type_, blob, task_path
                )
            )
        yield call(
            lambda m: m.graphs.put_writes,
            self.scope,
            thread_id=thread_id,
            checkpoint_ns=ns,
            checkpoint_id=str(checkpoint_id),
            writes=rows,
        )

    def _filtered(
        self, page: Page[GraphCheckpoint], filter: dict[str, Any] | None
    ) -> list[CheckpointTuple]:
        tuples = [self._tuple(row) for row in page.items]
        return [t for t in tuples if _matches(t.metadata, filter)]

    # -- sync interface --

    def get_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return run_sync(self._mem, self._get(config))

    def list(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> Iterator[CheckpointTuple]:
        left = limit
        cursor: str | None = None
        while left is None or left > 0:
            page = run_sync(self._mem, self._page(config, before, cursor))
            taken, left = _take(self._filtered(page, filter), left)
            yield from taken
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    def put(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return run_sync(self._mem, self._put(config, checkpoint, metadata))

    def put_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        run_sync(self._mem, self._put_writes(config, writes, task_id, task_path))

    def delete_thread(self, thread_id: str) -> None:
        self._mem.graphs.delete_thread(self.scope, str(thread_id))

    def delete_for_runs(self, run_ids: Sequence[str]) -> None:
        self._mem.graphs.delete_runs(self.scope, [str(r) for r in run_ids])

    def copy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        self._mem.graphs.copy_thread(self.scope, str(source_thread_id), str(target_thread_id))

    def prune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        self._mem.graphs.prune(
            self.scope,
            [str(t) for t in thread_ids],
            strategy=strategy,  # type: ignore[arg-type]
        )

    # -- async interface --

    async def aget_tuple(self, config: RunnableConfig) -> CheckpointTuple | None:
        return await run_async(self._amem, self._get(config))

    async def alist(
        self,
        config: RunnableConfig | None,
        *,
        filter: dict[str, Any] | None = None,
        before: RunnableConfig | None = None,
        limit: int | None = None,
    ) -> AsyncIterator[CheckpointTuple]:
        left = limit
        cursor: str | None = None
        while left is None or left > 0:
            page = await run_async(self._amem, self._page(config, before, cursor))
            taken, left = _take(self._filtered(page, filter), left)
            for found in taken:
                yield found
            if page.next_cursor is None:
                return
            cursor = page.next_cursor

    async def aput(
        self,
        config: RunnableConfig,
        checkpoint: Checkpoint,
        metadata: CheckpointMetadata,
        new_versions: ChannelVersions,
    ) -> RunnableConfig:
        return await run_async(self._amem, self._put(config, checkpoint, metadata))

    async def aput_writes(
        self,
        config: RunnableConfig,
        writes: Sequence[tuple[str, Any]],
        task_id: str,
        task_path: str = "",
    ) -> None:
        await run_async(self._amem, self._put_writes(config, writes, task_id, task_path))

    async def adelete_thread(self, thread_id: str) -> None:
        await self._amem.graphs.delete_thread(self.scope, str(thread_id))

    async def adelete_for_runs(self, run_ids: Sequence[str]) -> None:
        await self._amem.graphs.delete_runs(self.scope, [str(r) for r in run_ids])

    async def acopy_thread(self, source_thread_id: str, target_thread_id: str) -> None:
        await self._amem.graphs.copy_thread(
            self.scope, str(source_thread_id), str(target_thread_id)
        )

    async def aprune(self, thread_ids: Sequence[str], *, strategy: str = "keep_latest") -> None:
        await self._amem.graphs.prune(
            self.scope,
            [str(t) for t in thread_ids],
            strategy=strategy,  # type: ignore[arg-type]
        )

    # -- versions --

    def get_next_version(self, current: str | int | None, channel: None) -> str:
        """Zero-padded counter plus a random tail: increasing, and unique across forks."""
        number = 0 if current is None else int(str(current).split(".")[0])
        return f"{number + 1:032}.{random.random():016}"


class MemstrataSaver(_Saver):
    """LangGraph's ``BaseCheckpointSaver`` over a :class:`~memstrata.Memory` (see the
    module doc); the async methods use an :class:`~memstrata.AsyncMemory` on the same
    store."""

    def __init__(
        self,
        memory: Memory,
        scope: Scope,
        *,
        serde: SerializerProtocol | None = None,
        mirror_messages: bool = True,
        messages_key: str = "messages",
    ) -> None:
        if not isinstance(memory, Memory):
            raise InvalidInput(
                "MemstrataSaver needs an embedded Memory (graph checkpoints are not served "
                "over REST)",
                field="memory",
            )
        super().__init__(
            memory,
            AsyncMemory(memory.core),
            scope,
            serde=serde,
            mirror_messages=mirror_messages,
            messages_key=messages_key,
        )


class AsyncMemstrataSaver(_Saver):
    """LangGraph's ``BaseCheckpointSaver`` over an :class:`~memstrata.AsyncMemory` (see
    the module doc); the sync methods use a :class:`~memstrata.Memory` on the same store,
    so ``graph.get_state`` works beside ``await graph.ainvoke``."""

    def __init__(
        self,
        async_memory: AsyncMemory,
        scope: Scope,
        *,
        serde: SerializerProtocol | None = None,
        mirror_messages: bool = True,
        messages_key: str = "messages",
    ) -> None:
        if not isinstance(async_memory, AsyncMemory):
            raise InvalidInput(
                "AsyncMemstrataSaver needs an embedded AsyncMemory (graph checkpoints are "
                "not served over REST)",
                field="async_memory",
            )
        super().__init__(
            Memory(async_memory.core),
            async_memory,
            scope,
            serde=serde,
            mirror_messages=mirror_messages,
            messages_key=messages_key,
        )
