"""Generated from ``_async_graph.py`` by ``scripts/unasync.py``: do not edit."""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any, Literal

from memstrata.api._sync_base import SubAPI
from memstrata.errors import ConfigurationError
from memstrata.graph import checkpoints as ops
from memstrata.graph import items
from memstrata.graph.checkpoints import GraphCheckpoint, GraphWrite
from memstrata.graph.items import GraphItem
from memstrata.types import Page, Scope
from memstrata.validation import checked_scope as _scope

__all__ = ["Graphs"]


class Graphs(SubAPI):
    """Checkpoints of agent graphs, per scope and thread (any string thread id)."""

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
        self._write(
            ops.put_checkpoint,
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

    def put_writes(
        self,
        scope: Scope,
        *,
        thread_id: str,
        checkpoint_ns: str,
        checkpoint_id: str,
        writes: Sequence[GraphWrite],
    ) -> None:
        self._write(
            ops.put_writes,
            _scope(scope),
            thread_id=thread_id,
            checkpoint_ns=checkpoint_ns,
            checkpoint_id=checkpoint_id,
            writes=writes,
        )

    def get_checkpoint(
        self,
        scope: Scope,
        thread_id: str,
        checkpoint_ns: str = "",
        checkpoint_id: str | None = None,
    ) -> GraphCheckpoint | None:
        """That checkpoint, or the latest of the thread's namespace; None if there is none."""
        return self._read(
            ops.get_checkpoint, _scope(scope), thread_id, checkpoint_ns, checkpoint_id
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
        return self._read(
            ops.list_checkpoints,
            _scope(scope),
            thread_id=thread_id,
            checkpoint_ns=checkpoint_ns,
            checkpoint_id=checkpoint_id,
            before=before,
            limit=limit,
            cursor=cursor,
        )

    def delete_thread(self, scope: Scope, thread_id: str) -> None:
        self._write(ops.delete_thread, _scope(scope), thread_id)

    def delete_runs(self, scope: Scope, run_ids: Sequence[str]) -> None:
        self._write(ops.delete_for_runs, _scope(scope), list(run_ids))

    def copy_thread(self, scope: Scope, source: str, target: str) -> None:
        rt = self._core.rt
        self._write(ops.copy_thread, rt, _scope(scope), source, target)

    def prune(
        self,
        scope: Scope,
        thread_ids: Sequence[str],
        *,
        strategy: Literal["keep_latest", "delete"] = "keep_latest",
    ) -> None:
        self._write(ops.prune, _scope(scope), list(thread_ids), strategy)

    # -- store items (per tenant and agent: a store is shared by the tenant's users) --

    def put_item(
        self,
        tenant: str,
        namespace: Sequence[str],
        key: str,
        value: Mapping[str, Any],
        *,
        agent: str | None = None,
        ttl_s: float | None = None,
        vectors: Mapping[str, Sequence[float]] | None = None,
    ) -> None:
        """Store (replace) an item, with one vector per indexed field path."""
        rt, a = self._core.rt, _agent(tenant, agent)
        self._write(
            items.put_item, rt, tenant, a, namespace, key, value, ttl_s=ttl_s, vectors=vectors
        )

    def get_items(
        self,
        tenant: str,
        keys: Sequence[tuple[Sequence[str], str]],
        *,
        agent: str | None = None,
        refresh_ttl: bool = False,
    ) -> list[GraphItem | None]:
        """The live items at each ``(namespace, key)`` (None where there is none)."""
        rt, a = self._core.rt, _agent(tenant, agent)
        run = self._write if refresh_ttl else self._read
        return run(items.get_items, rt, tenant, a, keys, refresh_ttl=refresh_ttl)

    def delete_item(
        self, tenant: str, namespace: Sequence[str], key: str, *, agent: str | None = None
    ) -> None:
        a = _agent(tenant, agent)
        self._write(items.delete_item, tenant, a, namespace, key)

    def search_items(
        self,
        tenant: str,
        prefix: Sequence[str] = (),
        *,
        agent: str | None = None,
        with_vectors: bool = False,
        refresh_ttl: bool = False,
    ) -> list[GraphItem]:
        """Every live item under ``prefix``, newest first (the caller filters and ranks)."""
        rt, a = self._core.rt, _agent(tenant, agent)
        run = self._write if refresh_ttl else self._read
        return run(
            items.search_items,
            rt,
            tenant,
            a,
            prefix,
            with_vectors=with_vectors,
            refresh_ttl=refresh_ttl,
        )

    def list_namespaces(
        self, tenant: str, *, agent: str | None = None
    ) -> list[tuple[str, ...]]:
        """Every namespace holding a live item, sorted."""
        rt, a = self._core.rt, _agent(tenant, agent)
        return self._read(items.list_item_namespaces, rt, tenant, a)

    def embed(self, texts: Sequence[str]) -> list[list[float]]:
        """Vectors of ``texts`` by this memory's embedder (the one recall uses)."""
        embedder = self._core.recall.embedder
        if embedder is None:
            raise ConfigurationError(
                "this memory has no embedder (MEMSTRATA_EMBEDDER=none, or the default "
                "model is not installed); semantic search needs one"
            )
        return embedder.embed(list(texts))


def _agent(tenant: str, agent: str | None) -> str:
    return Scope(tenant, "store", agent).agent_key  # checks the names
