"""A CrewAI memory storage backend (CrewAI 1.15's ``StorageBackend``) over memstrata.

:class:`MemstrataStorage` keeps the records of a CrewAI ``Memory`` for one memstrata
scope (tenant, user, agent)::

    from crewai import Memory as CrewMemory
    storage = MemstrataStorage(mem, Scope(tenant="acme", user="alice"))
    crew_memory = CrewMemory(storage=storage, embedder=..., llm=...)

CrewAI embeds texts itself and hands over the vectors; each record is one item of
memstrata's graph item store (``mem.graphs``) with its vector, in the namespace
``("crewai", <user>, <record id>)`` of the scope's tenant and agent. So a user's records
are never seen by another user, tenant or agent.

- ``search`` ranks the scope's records by cosine similarity to CrewAI's query vector
  (a score in [-1, 1], kept when ``>= min_score``), after its filters: the scope prefix
  (a CrewAI scope path; ``/a`` holds ``/a`` and ``/a/b``, not ``/ab``), any of the
  categories, and metadata equal to every ``metadata_filter`` entry;
- ``delete`` removes the records matching every criterion given (no criterion: all);
- ``update`` replaces a record by id, ``reset`` deletes a scope path's records;
- ``asave``, ``asearch`` and ``adelete`` run on :class:`~memstrata.AsyncMemory`.

:func:`memstrata_embedder` gives CrewAI memstrata's own embedder (by default the offline
MiniLM model that ships with ``memstrata[embed]``) instead of its OpenAI default.

Storage errors raise (memstrata's :mod:`~memstrata.errors`); none is swallowed. A
search reads every record of the user (exact search, cost linear in their count), which
suits a crew's memory. ``mem.users.delete`` does not reach these items (they belong to
the tenant's store): ``storage.reset()`` removes a user's records.

Needs ``pip install 'memstrata[crewai]'`` in an environment of its own (see
docs/integrations.md: CrewAI pins ``mcp<2``, which memstrata's MCP server cannot use).
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from datetime import UTC, datetime
from typing import Any

import numpy as np

from memstrata.api import AsyncMemory, Memory
from memstrata.errors import InvalidInput, MissingDependency
from memstrata.graph.items import GraphItem
from memstrata.integrations._common import MemoryLike
from memstrata.types import Scope

try:
    from crewai.memory.storage.backend import EmbeddingDimensionMismatchError
    from crewai.memory.types import MemoryRecord, ScopeInfo
    from crewai.memory.utils import normalize_scope_path
except ImportError:
    raise MissingDependency(
        "the CrewAI integration needs crewai 1.15 or later: pip install 'memstrata[crewai]'"
    ) from None

__all__ = ["MemstrataStorage", "memstrata_embedder"]

NAMESPACE = "crewai"
_KEY = "record"
_FIELD = "content"  # the one vector an item carries: the embedding of the record's content


# -- records as items (pure) -------------------------------------------------------------------


def _label(text: str) -> str:
    """``text`` as a namespace label (labels may not hold ``.``); reversible."""
    return text.replace("%", "%25").replace(".", "%2E")


def _vector(record: MemoryRecord) -> list[float] | None:
    return list(record.embedding) if record.embedding else None


def _record(item: GraphItem) -> MemoryRecord:
    vector = item.vectors.get(_FIELD)
    return MemoryRecord.model_validate({**item.value, "embedding": vector})


def _check_dims(records: Sequence[MemoryRecord]) -> None:
    """One embedding size per batch: a mixed batch would make the store unsearchable."""
    sizes = [len(v) for v in map(_vector, records) if v is not None]
    for size in sizes[1:]:
        if size != sizes[0]:
            raise EmbeddingDimensionMismatchError(sizes[0], size)


def _scope_path(path: str | None) -> str:
    return str(normalize_scope_path(path or "/"))


def _under(scope: str, prefix: str | None) -> bool:
    """Whether scope path ``scope`` is ``prefix`` or below it (None or ``/``: anything)."""
    root = _scope_path(prefix)
    own = _scope_path(scope)
    return root == "/" or own == root or own.startswith(root + "/")


def _utc(moment: datetime) -> datetime:
    # CrewAI stamps records with naive UTC times; a caller may pass an aware cutoff.
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment


@dataclass(frozen=True)
class _Filter:
    """The criteria of a search or a delete; an unset criterion matches every record."""

    scope_prefix: str | None = None
    categories: Sequence[str] | None = None
    metadata: dict[str, Any] | None = None
    record_ids: Sequence[str] | None = None
    older_than: datetime | None = None

    def __call__(self, record: MemoryRecord) -> bool:
        if not _under(record.scope, self.scope_prefix):
            return False
        if self.categories and not set(self.categories) & set(record.categories):
            return False
        if self.metadata and any(record.metadata.get(k) != v for k, v in self.metadata.items()):
            return False
        if self.record_ids is not None and record.id not in self.record_ids:
            return False
        return self.older_than is None or _utc(record.created_at) < _utc(self.older_than)


def _rank(
    records: Iterable[MemoryRecord], query: Sequence[float], limit: int, min_score: float
) -> list[tuple[MemoryRecord, float]]:
    """The ``limit`` records most similar to ``query`` (cosine, at least ``min_score``)."""
    if limit < 1:
        raise InvalidInput("limit must be at least 1", field="limit")
    q = np.asarray(query, dtype=np.float64)
    if q.ndim != 1 or not q.size:
        raise InvalidInput("the query embedding is an empty vector", field="query_embedding")
    found = [r for r in records if r.embedding]
    if not found:
        return []
    for r in found:
        if len(r.embedding) != q.size:
            raise EmbeddingDimensionMismatchError(len(r.embedding), int(q.size))
    matrix = np.asarray([r.embedding for r in found], dtype=np.float64)
    norms = np.linalg.norm(matrix, axis=1) * np.linalg.norm(q)
    scores = np.divide(matrix @ q, norms, out=np.zeros(len(found)), where=norms > 0)
    order = sorted(range(len(found)), key=lambda i: (-scores[i], found[i].id))
    out = [(found[i], float(scores[i])) for i in order if scores[i] >= min_score]
    return out[:limit]


def _children(scopes: Iterable[str], parent: str) -> list[str]:
    """The immediate child scope paths of ``parent`` among ``scopes``."""
    root = _scope_path(parent)
    base = "" if root == "/" else root
    kids = {
        base + "/" + own[len(base) + 1 :].split("/", 1)[0]
        for own in map(_scope_path, scopes)
        if own != root and _under(own, root)
    }
    return sorted(kids)


def _scope_info(records: Sequence[MemoryRecord], scope: str) -> ScopeInfo:
    inside = [r for r in records if _under(r.scope, scope)]
    created = [r.created_at for r in inside]
    return ScopeInfo(
        path=_scope_path(scope),
        record_count=len(inside),
        categories=sorted({c for r in inside for c in r.categories}),
        oldest_record=min(created, key=_utc) if created else None,
        newest_record=max(created, key=_utc) if created else None,
        child_scopes=_children((r.scope for r in inside), scope),
    )


def _newest_first(records: Iterable[MemoryRecord]) -> list[MemoryRecord]:
    return sorted(records, key=lambda r: (_utc(r.created_at), r.id), reverse=True)


# -- the backend -------------------------------------------------------------------------------


def memstrata_embedder(memory: MemoryLike) -> Callable[[list[str]], list[list[float]]]:
    """A CrewAI ``embedder`` (``Memory(embedder=...)``): the texts' vectors by ``memory``'s
    own embedder, the one its recall uses (ConfigurationError when it has none)."""
    graphs = _sync_of(memory).graphs

    def embed(texts: list[str]) -> list[list[float]]:
        return graphs.embed(list(texts))

    return embed


def _sync_of(memory: MemoryLike) -> Memory:
    if not isinstance(memory, Memory | AsyncMemory):
        raise InvalidInput(
            f"expected a memstrata Memory or AsyncMemory, got {type(memory).__name__}",
            field="memory",
        )
    return Memory(memory.core)


class MemstrataStorage:
    """CrewAI memory records of one memstrata ``scope`` (see the module's docstring).

    ``memory`` is a :class:`~memstrata.Memory` or :class:`~memstrata.AsyncMemory`; the
    sync methods and the async ones work on the same store either way.
    """

    def __init__(self, memory: MemoryLike, scope: Scope) -> None:
        self._sync = _sync_of(memory)
        self._async = AsyncMemory(self._sync.core)
        self.scope = scope
        self._tenant = scope.tenant
        self._agent = scope.agent
        self._prefix = (NAMESPACE, _label(scope.user))

    def _namespace(self, record_id: str) -> tuple[str, ...]:
        if not isinstance(record_id, str) or not record_id:
            raise InvalidInput("a record id is a non-empty string", field="record_id")
        return (*self._prefix, _label(record_id))

    def _put_args(self, record: MemoryRecord) -> tuple[tuple[Any, ...], dict[str, Any]]:
        """The arguments of ``graphs.put_item`` that store ``record``."""
        vector = _vector(record)
        return (
            (self._tenant, self._namespace(record.id), _KEY, record.model_dump(mode="json")),
            {"agent": self._agent, "vectors": {_FIELD: vector} if vector else None},
        )

    # -- sync --------------------------------------------------------------------------------

    def _all(self, prefix: tuple[str, ...] | None = None) -> list[MemoryRecord]:
        found = self._sync.graphs.search_items(
            self._tenant, prefix or self._prefix, agent=self._agent, with_vectors=True
        )
        return [_record(item) for item in found]

    def _remove(self, records: Sequence[MemoryRecord]) -> int:
        for record in records:
            self._sync.graphs.delete_item(
                self._tenant, self._namespace(record.id), _KEY, agent=self._agent
            )
        return len(records)

    def save(self, records: list[MemoryRecord]) -> None:
        """Store ``records`` (a record with an id already stored replaces it)."""
        _check_dims(records)
        for record in records:
            args, kwargs = self._put_args(record)
            self._sync.graphs.put_item(*args, **kwargs)

    def search(
        self,
        query_embedding: list[float],
        scope_prefix: str | None = None,
        categories: list[str] | None = None,
        metadata_filter: dict[str, Any] | None = None,
        limit: int = 10,
        min_score: float = 0.0,
    ) -> list[tuple[MemoryRecord, float]]:
        """The records most similar to ``query_embedding`` that pass the filters, best first."""
        keep = _Filter(scope_prefix, categories, metadata_filter)
        return _rank(filter(keep, self._all()), query_embedding, limit, min_score)

    def delete(
        self,
        scope_prefix: str | None = None,
        categories: list[str] | None = None,
        record_ids: list[str] | None = None,
        older_than: datetime | None = None,
        metadata_filter: dict[str, Any] | None = None,
    ) -> int:
        """Delete the records matching every criterion given; returns how many."""
        keep = _Filter(scope_prefix, categories, metadata_filter, record_ids, older_than)
        return self._remove([r for r in self._all() if keep(r)])

    def update(self, record: MemoryRecord) -> None:
        """Replace the record with ``record.id`` (stored afresh if it is gone)."""
        self.save([record])

    def get_record(self, record_id: str) -> MemoryRecord | None:
        """The record with ``record_id``, with its embedding; None if there is none."""
        found = self._all(self._namespace(record_id))
        return found[0] if found else None

    def list_records(
        self, scope_prefix: str | None = None, limit: int = 200, offset: int = 0
    ) -> list[MemoryRecord]:
        """The records under ``scope_prefix``, newest first."""
        if limit < 0 or offset < 0:
            raise InvalidInput("limit and offset are not negative", field="limit")
        keep = _Filter(scope_prefix)
        return _newest_first(filter(keep, self._all()))[offset : offset + limit]

    def get_scope_info(self, scope: str) -> ScopeInfo:
        """Record count, categories, date range and child scopes of ``scope``."""
        return _scope_info(self._all(), scope)

    def list_scopes(self, parent: str = "/") -> list[str]:
        """The immediate child scopes of ``parent`` that hold records."""
        return _children((r.scope for r in self._all()), parent)

    def list_categories(self, scope_prefix: str | None = None) -> dict[str, int]:
        """How many records under ``scope_prefix`` carry each category."""
        keep = _Filter(scope_prefix)
        return dict(Counter(c for r in filter(keep, self._all()) for c in r.categories))

    def count(self, scope_prefix: str | None = None) -> int:
        """How many records are under ``scope_prefix`` (None: all of the scope's)."""
        return sum(1 for _ in filter(_Filter(scope_prefix), self._all()))

    def reset(self, scope_prefix: str | None = None) -> None:
        """Delete every record under ``scope_prefix`` (None: all of the scope's)."""
        self.delete(scope_prefix=scope_prefix)

    # -- async -------------------------------------------------------------------------------

    async def _aall(self) -> list[MemoryRecord]:
        found = await self._async.graphs.search_items(
            self._tenant, self._prefix, agent=self._agent, with_vectors=True
        )
        return [_record(item) for item in found]

    async def asave(self, records: list[MemoryRecord]) -> None:
        """:meth:`save` on the async facade."""
        _check_dims(records)
        for record in records:
            args, kwargs = self._put_args(record)
            await self._async.graphs.put_item(*args, **kwargs)

    async def asearch(
        self,
        query_embedding: list[float],
        scope_prefix: str | None = None,
        categories: list[str] | None = None,
        metadata_filter: dict[str, Any] | None = None,
        limit: int = 10,
        min_score: float = 0.0,
    ) -> list[tuple[MemoryRecord, float]]:
        """:meth:`search` on the async facade."""
        keep = _Filter(scope_prefix, categories, metadata_filter)
        return _rank(filter(keep, await self._aall()), query_embedding, limit, min_score)

    async def adelete(
        self,
        scope_prefix: str | None = None,
        categories: list[str] | None = None,
        record_ids: list[str] | None = None,
        older_than: datetime | None = None,
        metadata_filter: dict[str, Any] | None = None,
    ) -> int:
        """:meth:`delete` on the async facade."""
        keep = _Filter(scope_prefix, categories, metadata_filter, record_ids, older_than)
        doomed = [r for r in await self._aall() if keep(r)]
        for record in doomed:
            await self._async.graphs.delete_item(
                self._tenant, self._namespace(record.id), _KEY, agent=self._agent
            )
        return len(doomed)
