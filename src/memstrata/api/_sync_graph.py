"""Generated from ``_async_graph.py`` by ``scripts/unasync.py``: do not edit."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Literal

from memstrata.api.core import Core
from memstrata.api.core import checked_scope as _scope
from memstrata.graph import checkpoints as ops
from memstrata.graph.checkpoints import GraphCheckpoint, GraphWrite
from memstrata.storage.plan import read, write
from memstrata.types import Page, Scope

__all__ = ["Graphs"]


class Graphs:
    """Checkpoints of agent graphs, per scope and thread (any string thread id)."""

    def __init__(self, core: Core) -> None:
        self._core = core

    def put_checkpoint(
        self,
        scope: Scope,
        *,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        parent_id: str | None,
        type: str,
        checkpoint: bytes,
        metadata_type: str,
        metadata: bytes,
        run_id: str | None = None,
    ) -> None:
        rt = self._core.rt
        self._core.engine.run(
            write(
                lambda: ops.put_checkpoint(
                    rt,
                    _scope(scope),
                    thread_id=thread_id,
                    checkpoint_ns=checkpoint_ns,
                    checkpoint_id=checkpoint_id,
                    parent_id=parent_id,
                    run_id=run_id,
                    type=type,
                    checkpoint=checkpoint,
                    metadata_type=metadata_type,
                    metadata=metadata,
                )
            )
        )

    def put_writes(
        self,
        scope: Scope,
        *,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        writes: Sequence[GraphWrite],
    ) -> None:
        self._core.engine.run(
            write(
                lambda: ops.put_writes(
                    _scope(scope),
                    thread_id=thread_id,
                    checkpoint_ns=checkpoint_ns,
                    checkpoint_id=checkpoint_id,
                    writes=writes,
                )
            )
        )

    def get_checkpoint(
        self,
        scope: Scope,
        thread_id: str,
        checkpoint_ns: str = "",
        checkpoint_id: str | None = None,
    ) -> GraphCheckpoint | None:
        """That checkpoint, or the latest of the thread's namespace; None if there is none."""
        return self._core.engine.run(
            read(lambda: ops.get_checkpoint(_scope(scope), thread_id, checkpoint_ns, checkpoint_id))
        )

    def list_checkpoints(
        self,
        scope: Scope,
        *,
        thread_id: str | None = None,
        checkpoint_ns: str | None = None,
        checkpoint_id: str | None = None,
        before: str | None = None,
        limit: int = 100,
        cursor: str | None = None,
    ) -> Page[GraphCheckpoint]:
        """By thread, then namespace, newest first; ``before`` keeps older ids only."""
        return self._core.engine.run(
            read(
                lambda: ops.list_checkpoints(
                    _scope(scope),
                    thread_id=thread_id,
                    checkpoint_ns=checkpoint_ns,
                    checkpoint_id=checkpoint_id,
                    before=before,
                    limit=limit,
                    cursor=cursor,
                )
            )
        )

    def delete_thread(self, scope: Scope, thread_id: str) -> None:
        self._core.engine.run(write(lambda: ops.delete_thread(_scope(scope), thread_id)))

    def delete_runs(self, scope: Scope, run_ids: Sequence[str]) -> None:
        self._core.engine.run(
            write(lambda: ops.delete_for_runs(_scope(scope), list(run_ids)))
        )

    def copy_thread(self, scope: Scope, source: str, target: str) -> None:
        rt = self._core.rt
        self._core.engine.run(
            write(lambda: ops.copy_thread(rt, _scope(scope), source, target))
        )

    def prune(
        self,
        scope: Scope,
        thread_ids: Sequence[str],
        *,
        strategy: Literal["keep_latest", "delete"] = "keep_latest",
    ) -> None:
        self._core.engine.run(
            write(lambda: ops.prune(_scope(scope), list(thread_ids), strategy))
        )
