"""The free namespaces of :class:`~memstrata.integrations.langgraph.MemstrataStore`.

Any namespace outside the facts and working-memory shapes (``("memories", user_id)``,
``("docs",)``, ...) holds plain items on ``mem.graphs``: string keys, JSON-object
values, an optional TTL, and, with an ``index`` configured, one vector per indexed field
for semantic search. This module is those steps plus the embedding side:
:class:`Embedding` turns LangGraph's ``IndexConfig`` into requests for the memory's own
embedder (the default, offline MiniLM model) or the embeddings the config names.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any, Literal

from langgraph.store.base import IndexConfig, PutOp
from langgraph.store.base.embed import ensure_embeddings, get_text_at_path, tokenize_path

from memstrata.errors import InvalidInput
from memstrata.graph.items import GraphItem
from memstrata.integrations.langgraph._steps import Local, Steps, call

__all__ = ["Embedding", "cosine", "get_item", "item_namespaces", "put_item", "search_items"]


def cosine(a: Sequence[float], b: Sequence[float]) -> float:
    dot = sum(x * y for x, y in zip(a, b, strict=False))
    norm = math.sqrt(sum(x * x for x in a)) * math.sqrt(sum(y * y for y in b))
    return dot / norm if norm else 0.0


@dataclass(frozen=True)
class Embedding:
    """An ``IndexConfig`` made usable: which fields to embed, and how.

    ``embed`` left out (or ``"memstrata"``) means the memory's own embedder.
    """

    fields: tuple[str, ...]
    dims: int | None
    model: Any | None  # a LangChain Embeddings, or None for the memory's embedder

    @classmethod
    def of(cls, index: IndexConfig | Mapping[str, Any]) -> Embedding:
        embed = index.get("embed")
        model = None if embed in (None, "memstrata") else ensure_embeddings(embed)
        fields = tuple(index.get("fields") or ("$",))
        for path in fields:
            tokenize_path(path)  # a malformed path fails here, not on the first put
        return cls(fields, index.get("dims"), model)

    def texts(self, value: Mapping[str, Any], fields: Sequence[str] | None) -> dict[str, str]:
        """The text of each indexed field path found in ``value`` (path -> text)."""
        out: dict[str, str] = {}
        for path in fields if fields is not None else self.fields:
            for i, text in enumerate(get_text_at_path(dict(value), path)):
                out[path if i == 0 else f"{path}#{i}"] = text
        return out

    def vectors(self, texts: Sequence[str], kind: Literal["documents", "query"]) -> Steps[Any]:
        if not texts:
            return []
        if self.model is None:
            got = yield call(lambda m: m.graphs.embed, list(texts))
        elif kind == "query":
            got = [(yield Local(self.model.embed_query, self.model.aembed_query, (texts[0],)))]
        else:
            got = yield Local(
                self.model.embed_documents, self.model.aembed_documents, (list(texts),)
            )
        if self.dims is not None and any(len(v) != self.dims for v in got):
            raise InvalidInput(
                f"the index says dims={self.dims}; the embedder made {len(got[0])}", field="dims"
            )
        return got


def get_item(
    tenant: str, agent: str | None, namespace: tuple[str, ...], key: str, refresh: bool
) -> Steps[GraphItem | None]:
    got: list[GraphItem | None] = yield call(
        lambda m: m.graphs.get_items, tenant, [(namespace, key)], agent=agent
    )
    found = got[0]
    if found is None:
        return None
    if refresh and found.expires_at is not None:
        yield call(
            lambda m: m.graphs.get_items, tenant, [(namespace, key)], agent=agent, refresh_ttl=True
        )
    return found


def put_item(tenant: str, agent: str | None, op: PutOp, embedding: Embedding | None) -> Steps[None]:
    if op.value is None:
        yield call(lambda m: m.graphs.delete_item, tenant, op.namespace, op.key, agent=agent)
        return
    vectors: dict[str, list[float]] = {}
    if embedding is not None and op.index is not False:
        texts = embedding.texts(op.value, None if op.index is None else list(op.index))
        got = yield from embedding.vectors(list(texts.values()), "documents")
        vectors = dict(zip(texts, got, strict=True))
    yield call(
        lambda m: m.graphs.put_item,
        tenant,
        op.namespace,
        op.key,
        op.value,
        agent=agent,
        ttl_s=None if op.ttl is None else op.ttl * 60,  # LangGraph's TTLs are in minutes
        vectors=vectors,
    )


def search_items(
    tenant: str, agent: str | None, prefix: tuple[str, ...], with_vectors: bool
) -> Steps[list[GraphItem]]:
    found: list[GraphItem] = yield call(
        lambda m: m.graphs.search_items, tenant, prefix, agent=agent, with_vectors=with_vectors
    )
    return found


def refresh(tenant: str, agent: str | None, shown: Sequence[GraphItem]) -> Steps[None]:
    """Push back the expiry of the expiring items a read returned."""
    keys = [(f.namespace, f.key) for f in shown if f.expires_at is not None]
    if keys:
        yield call(lambda m: m.graphs.get_items, tenant, keys, agent=agent, refresh_ttl=True)


def item_namespaces(tenant: str, agent: str | None) -> Steps[list[tuple[str, ...]]]:
    names: list[tuple[str, ...]] = yield call(
        lambda m: m.graphs.list_namespaces, tenant, agent=agent
    )
    return names
