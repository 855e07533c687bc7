"""The vector-search port: what semantic recall needs from a vector index.

An index is bound to one *space*: an embedder identity and its dimension.
Vectors are stored with that identity, so a search never compares vectors of
two embedders (changing embedders means a reindex); an identity that shows up
with a second dimension is refused, since mixing spaces would give meaningless
scores.

Every search names a scope and is filtered by tenant and user (and agent when
the scope has one): there is no unscoped search. Scores are cosine
similarities in ``[-1, 1]``, higher is better.

The relational ``vectors`` table (float32 little-endian bytes) is the source of
truth on every backend. Operations are sans-IO (:mod:`memstrata.storage.plan`),
so the sync and async methods share one implementation and a feature can also
compose an ``*_op`` into a transaction of its own.
"""

from __future__ import annotations

import math
from collections.abc import Callable, Iterable, Sequence
from dataclasses import dataclass
from typing import Any, Literal, Protocol, runtime_checkable

import numpy as np
import numpy.typing as npt

from memstrata.errors import Conflict, InvalidInput
from memstrata.ids import new_id
from memstrata.storage.engine import Engine
from memstrata.storage.plan import Exec, Op, Query, read, write
from memstrata.storage.sql import BATCH, now_micros, placeholders
from memstrata.types import Scope

__all__ = [
    "MAX_EXCLUDED",
    "MAX_K",
    "IndexKind",
    "PlannedIndex",
    "Space",
    "VectorHit",
    "VectorIndex",
    "VectorItem",
    "bump_owner",
    "delete_for_conversations",
    "delete_for_messages",
    "delete_for_user",
]

IndexKind = Literal["exact", "pgvector-hnsw"]

#: Largest ``k`` a search accepts (pgvector's ``hnsw.ef_search`` tops out at 1000).
MAX_K = 1000
#: Most message ids one search may exclude (they travel as SQL parameters).
MAX_EXCLUDED = 10_000

Vector = Sequence[float] | npt.NDArray[Any]


@dataclass(frozen=True, slots=True)
class Space:
    """An embedder identity (e.g. ``FakeEmbedder.identity``) and its vector dimension."""

    embedder: str
    dim: int

    def __post_init__(self) -> None:
        if not isinstance(self.embedder, str) or not self.embedder or len(self.embedder) > 256:
            raise InvalidInput("embedder identity must be 1-256 characters", field="embedder")
        if (
            isinstance(self.dim, bool)
            or not isinstance(self.dim, int)
            or not 1 <= self.dim <= 16_000
        ):
            raise InvalidInput(f"dim must be an integer in 1..16000, got {self.dim!r}", field="dim")


@dataclass(frozen=True, slots=True)
class VectorItem:
    """One vector to index: ``id`` is the caller's (adding the same id again replaces it)."""

    id: str
    scope: Scope
    conversation_id: str
    message_id: str
    vector: Vector


@dataclass(frozen=True, slots=True)
class VectorHit:
    """One search result; ``id`` is the :class:`VectorItem` id it came from."""

    id: str
    message_id: str
    conversation_id: str
    score: float


@runtime_checkable
class VectorIndex(Protocol):
    """A vector index over one :class:`Space`. ``kind`` says which implementation runs."""

    kind: IndexKind
    space: Space
    reason: str

    def add(self, items: Sequence[VectorItem]) -> int:
        """Store (or replace, by id) ``items``; returns how many were written."""
        ...

    async def aadd(self, items: Sequence[VectorItem]) -> int: ...

    def search(
        self,
        scope: Scope,
        query: Vector,
        k: int = 10,
        *,
        conversation_id: str | None = None,
        exclude_message_ids: Iterable[str] = (),
    ) -> list[VectorHit]:
        """The ``k`` vectors of ``scope`` most similar to ``query``, best first."""
        ...

    async def asearch(
        self,
        scope: Scope,
        query: Vector,
        k: int = 10,
        *,
        conversation_id: str | None = None,
        exclude_message_ids: Iterable[str] = (),
    ) -> list[VectorHit]: ...

    def count(self, scope: Scope | None = None) -> int:
        """Vectors of this space, of ``scope`` when given."""
        ...

    async def acount(self, scope: Scope | None = None) -> int: ...

    def delete_for_conversations(self, ids: Sequence[str]) -> Op[None]:
        """Cascade step (``Cascade.on_conversation_delete``)."""
        ...

    def delete_for_user(self, tenant: str, user: str) -> Op[None]:
        """Cascade step (``Cascade.on_user_delete``)."""
        ...


# -- validation ----------------------------------------------------------------------------


def unit_vector(vector: Vector, dim: int, field: str = "vector") -> npt.NDArray[np.float32]:
    """``vector`` scaled to length 1 as float32; wrong shape, NaN, inf or zero is InvalidInput.

    Cosine similarity ignores length, so storing unit vectors loses nothing and
    turns every exact search into one matrix-vector product.
    """
    try:
        arr = np.asarray(vector, dtype=np.float64)
    except (TypeError, ValueError):
        raise InvalidInput(f"{field} must be a sequence of numbers", field=field) from None
    if arr.ndim != 1 or arr.shape[0] != dim:
        got = arr.shape[0] if arr.ndim == 1 else f"shape {arr.shape}"
        raise InvalidInput(
            f"{field} has dimension {got}, this index holds dimension {dim}; "
            "vectors of different spaces cannot be mixed (reindex to change embedders)",
            field=field,
        )
    if not np.all(np.isfinite(arr)):
        raise InvalidInput(f"{field} contains NaN or infinite values", field=field)
    norm = float(np.linalg.norm(arr))
    if norm == 0.0 or not math.isfinite(norm):
        raise InvalidInput(f"{field} is a zero vector: cosine similarity is undefined", field=field)
    return (arr / norm).astype("<f4")


def check_search_args(k: int, exclude: Iterable[str]) -> frozenset[str]:
    if isinstance(exclude, str):  # a lone id would otherwise be read as its characters
        raise InvalidInput(
            "exclude_message_ids must be a collection of ids, not one string",
            field="exclude_message_ids",
        )
    if isinstance(k, bool) or not isinstance(k, int) or not 1 <= k <= MAX_K:
        raise InvalidInput(f"k must be an integer in 1..{MAX_K}, got {k!r}", field="k")
    excluded = frozenset(exclude)
    if len(excluded) > MAX_EXCLUDED:
        raise InvalidInput(
            f"at most {MAX_EXCLUDED} message ids can be excluded", field="exclude_message_ids"
        )
    return excluded


@dataclass(frozen=True, slots=True)
class Prepared:
    """A validated item: its unit vector as float32 little-endian bytes and array."""

    item: VectorItem
    unit: npt.NDArray[np.float32]

    @property
    def blob(self) -> bytes:
        return self.unit.tobytes()


def prepare(items: Sequence[VectorItem], dim: int) -> list[Prepared]:
    seen: set[str] = set()
    out: list[Prepared] = []
    for n, item in enumerate(items):
        if not isinstance(item, VectorItem):
            raise InvalidInput(f"items[{n}] must be a VectorItem", field="items")
        if not isinstance(item.scope, Scope):
            raise InvalidInput(f"items[{n}].scope must be a memstrata.Scope", field="scope")
        for name in ("id", "conversation_id", "message_id"):
            value = getattr(item, name)
            if not isinstance(value, str) or not value:
                raise InvalidInput(f"items[{n}].{name} must be a non-empty string", field=name)
        if item.id in seen:
            raise InvalidInput(f"vector id {item.id!r} appears twice in one add", field="id")
        seen.add(item.id)
        out.append(Prepared(item, unit_vector(item.vector, dim, field=f"items[{n}].vector")))
    return out


# -- shared operations ---------------------------------------------------------------------


def register_space(space: Space, now: int, index_table: str | None = None) -> Op[None]:
    """Record the space; an identity already stored with another dimension is refused."""
    rows = yield Query(
        "SELECT dim, index_table FROM vector_spaces WHERE embedder = ?", (space.embedder,)
    )
    if rows:
        if int(rows[0][0]) != space.dim:
            raise InvalidInput(
                f"embedder {space.embedder!r} already has vectors of dimension {rows[0][0]}, "
                f"not {space.dim}: the same identity cannot hold two spaces (reindex instead)",
                field="dim",
            )
        if index_table is not None and rows[0][1] != index_table:
            yield Exec(
                "UPDATE vector_spaces SET index_table = ? WHERE embedder = ?",
                (index_table, space.embedder),
            )
        return
    yield Exec(
        "INSERT INTO vector_spaces (embedder, dim, index_table, created_at) VALUES (?, ?, ?, ?) "
        "ON CONFLICT DO NOTHING",
        (space.embedder, space.dim, index_table, now),
    )


def bump_owner(tenant: str, user: str, *, deleted: bool, epoch: str) -> Op[int]:
    """Count one more write to ``(tenant, user)``'s vectors; returns the new version.

    ``deleted``: the write removed or replaced vectors (a cache must reload, not extend).
    ``epoch`` names the owner row if this creates it. Callers bump owners in sorted order,
    so two transactions never wait on each other's owner rows (PostgreSQL row locks).
    """
    rows = yield Query(
        "INSERT INTO vector_owners (tenant_id, user_id, epoch, version, deleted_version) "
        "VALUES (?, ?, ?, 1, ?) ON CONFLICT (tenant_id, user_id) DO UPDATE SET "
        "version = vector_owners.version + 1, deleted_version = CASE WHEN ? = 1 "
        "THEN vector_owners.version + 1 ELSE vector_owners.deleted_version END "
        "RETURNING version",
        (tenant, user, epoch, int(deleted), int(deleted)),
    )
    return int(rows[0][0])


def _bump_owners_of(sql: str, params: Sequence[Any]) -> Op[None]:
    """Bump (as deleting) every owner of the vectors ``sql`` selects (tenant, user)."""
    rows = yield Query(sql, params)
    for tenant, user in sorted({(str(t), str(u)) for t, u in rows}):
        yield from bump_owner(tenant, user, deleted=True, epoch=new_id())


def write_rows(space: Space, batch: Sequence[Prepared], now: int) -> Op[None]:
    """Replace-by-id of one batch in ``vectors``; an id owned by another user is a Conflict.

    Delete-then-insert (rather than an upsert) also removes the row from any derived
    index table, through its ``ON DELETE CASCADE`` foreign key. Each owner's version goes
    up once (see :func:`bump_owner`); the rows carry it.
    """
    ids = [p.item.id for p in batch]
    rows = yield Query(
        f"SELECT id, tenant_id, user_id FROM vectors WHERE id IN ({placeholders(len(ids))})", ids
    )
    replaced: set[tuple[str, str]] = set()
    owners = {p.item.id: (p.item.scope.tenant, p.item.scope.user) for p in batch}
    for vid, tenant, user in rows:
        if owners[vid] != (tenant, user):
            raise Conflict(f"vector id {vid!r} is already used by another scope")
        replaced.add((tenant, user))
    # Owner rows first, then vectors: the order every writer and deleter locks in.
    versions: dict[tuple[str, str], int] = {}
    for owner in sorted(set(owners.values())):
        versions[owner] = yield from bump_owner(*owner, deleted=owner in replaced, epoch=new_id())
    if rows:
        taken = [r[0] for r in rows]
        yield Exec(f"DELETE FROM vectors WHERE id IN ({placeholders(len(taken))})", taken)
    params: list[Any] = []
    for p in batch:
        s = p.item.scope
        params += [
            p.item.id,
            s.tenant,
            s.user,
            s.agent_key,
            p.item.conversation_id,
            p.item.message_id,
            space.embedder,
            space.dim,
            p.blob,
            now,
            versions[(s.tenant, s.user)],
        ]
    values = ", ".join(["(?, ?, ?, ?, ?, ?, ?, ?, ?, ?, ?)"] * len(batch))
    yield Exec(
        "INSERT INTO vectors (id, tenant_id, user_id, agent_id, conversation_id, message_id, "
        f"embedder, dim, vector, created_at, version) VALUES {values}",
        params,
    )


def scope_filter(scope: Scope, prefix: str = "") -> tuple[str, list[Any]]:
    """The WHERE clause every search starts with: tenant AND user, agent when given."""
    if not isinstance(scope, Scope):
        raise InvalidInput(
            f"scope must be a memstrata.Scope, got {type(scope).__name__}", field="scope"
        )
    sql = f"{prefix}tenant_id = ? AND {prefix}user_id = ?"
    params: list[Any] = [scope.tenant, scope.user]
    if scope.agent is not None:
        sql += f" AND {prefix}agent_id = ?"
        params.append(scope.agent)
    return sql, params


def count_op(space: Space, scope: Scope | None) -> Op[int]:
    sql = "SELECT count(*) FROM vectors WHERE embedder = ? AND dim = ?"
    params: list[Any] = [space.embedder, space.dim]
    if scope is not None:
        where, extra = scope_filter(scope)
        sql += f" AND {where}"
        params += extra
    rows = yield Query(sql, params)
    return int(rows[0][0])


def rank(hits: list[VectorHit], k: int) -> list[VectorHit]:
    """Best first; equal scores by id, so every backend orders ties the same way."""
    hits.sort(key=lambda h: (-h.score, h.id))
    return hits[:k]


def clip(score: float) -> float:
    """Float rounding can step just outside the cosine range; clamp it back."""
    return min(1.0, max(-1.0, score))


def delete_for_conversations(ids: Sequence[str]) -> Op[None]:
    """Cascade step: vectors of deleted conversations go with them, in every space.

    Rows of a derived index table (pgvector) follow through their foreign key.
    """
    for start in range(0, len(ids), BATCH):
        batch = list(ids[start : start + BATCH])
        where = f"conversation_id IN ({placeholders(len(batch))})"
        yield from _bump_owners_of(
            f"SELECT DISTINCT tenant_id, user_id FROM vectors WHERE {where}", batch
        )
        yield Exec(f"DELETE FROM vectors WHERE {where}", batch)


def delete_for_messages(conversation_id: str, ids: Sequence[str]) -> Op[None]:
    """Cascade step: vectors of single deleted messages go with them, in every space."""
    where = f"conversation_id = ? AND message_id IN ({placeholders(len(ids))})"
    params = (conversation_id, *ids)
    yield from _bump_owners_of(
        f"SELECT DISTINCT tenant_id, user_id FROM vectors WHERE {where}", params
    )
    yield Exec(f"DELETE FROM vectors WHERE {where}", params)


def delete_for_user(tenant: str, user: str) -> Op[None]:
    """Cascade step: a deleted user's vectors go too, including any not tied to a conversation.

    The owner row goes as well, first (the lock order of every vector write): nothing of
    the user is left, and one made again later has a new epoch, so no cache mistakes it
    for this one.
    """
    yield Exec("DELETE FROM vector_owners WHERE tenant_id = ? AND user_id = ?", (tenant, user))
    yield Exec("DELETE FROM vectors WHERE tenant_id = ? AND user_id = ?", (tenant, user))


def _replayable(ids: Iterable[str]) -> Iterable[str]:
    """A one-shot iterator becomes a tuple, so a retried read sees the same ids."""
    return ids if isinstance(ids, str) else tuple(ids)


class PlannedIndex:
    """The engine-facing half shared by the implementations: each public method runs
    the matching ``*_op`` in one transaction, with ``engine.run`` or ``engine.arun``."""

    kind: IndexKind

    def __init__(
        self, engine: Engine, space: Space, *, clock: Callable[[], int] = now_micros
    ) -> None:
        self.engine = engine
        self.space = space
        self.clock = clock
        #: Why this kind was chosen, for ``memstrata doctor`` and ``/readyz``.
        self.reason = ""

    # Implementations provide these two.
    def add_op(self, items: Sequence[VectorItem]) -> Op[int]:
        raise NotImplementedError

    def search_op(
        self,
        scope: Scope,
        query: Vector,
        k: int = 10,
        *,
        conversation_id: str | None = None,
        exclude_message_ids: Iterable[str] = (),
    ) -> Op[list[VectorHit]]:
        raise NotImplementedError

    def count_op(self, scope: Scope | None = None) -> Op[int]:
        return count_op(self.space, scope)

    def add(self, items: Sequence[VectorItem]) -> int:
        return self.engine.run(write(lambda: self.add_op(items)))

    async def aadd(self, items: Sequence[VectorItem]) -> int:
        return await self.engine.arun(write(lambda: self.add_op(items)))

    def search(
        self,
        scope: Scope,
        query: Vector,
        k: int = 10,
        *,
        conversation_id: str | None = None,
        exclude_message_ids: Iterable[str] = (),
    ) -> list[VectorHit]:
        excluded = _replayable(exclude_message_ids)
        return self.engine.run(
            read(
                lambda: self.search_op(
                    scope, query, k, conversation_id=conversation_id, exclude_message_ids=excluded
                )
            )
        )

    async def asearch(
        self,
        scope: Scope,
        query: Vector,
        k: int = 10,
        *,
        conversation_id: str | None = None,
        exclude_message_ids: Iterable[str] = (),
    ) -> list[VectorHit]:
        excluded = _replayable(exclude_message_ids)
        return await self.engine.arun(
            read(
                lambda: self.search_op(
                    scope, query, k, conversation_id=conversation_id, exclude_message_ids=excluded
                )
            )
        )

    def count(self, scope: Scope | None = None) -> int:
        return self.engine.run(read(lambda: self.count_op(scope)))

    async def acount(self, scope: Scope | None = None) -> int:
        return await self.engine.arun(read(lambda: self.count_op(scope)))

    def delete_for_conversations(self, ids: Sequence[str]) -> Op[None]:
        return delete_for_conversations(ids)

    def delete_for_user(self, tenant: str, user: str) -> Op[None]:
        return delete_for_user(tenant, user)

    def forget_owner(self, tenant: str, user: str) -> None:
        """Drop whatever this process keeps in memory of a user's vectors (none here)."""

    def __repr__(self) -> str:
        return f"<{type(self).__name__} {self.kind} {self.space.embedder!r} dim={self.space.dim}>"
