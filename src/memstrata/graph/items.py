"""Key-value items of a graph store (sans-IO storage operations).

An item lives in a namespace (a tuple of labels, stored joined by ``.``, which
LangGraph refuses inside a label) under a string key, per tenant and agent. Its value is
a JSON object. An item may expire (``ttl_s``; reading it may push the expiry back), and
may carry one vector per indexed field for semantic search; a put replaces the value
and the vectors together. Expired items are invisible at once and removed by the next
put of their tenant.

Under encryption at rest a value is sealed with the tenant's data key (the items are the
tenant's, shared by its users), bound to its agent, namespace and key; namespaces and
keys stay in clear (listings and prefix searches are SQL on them). Searching values is
the caller's, in memory, on the opened values, so it works the same sealed.
"""

from __future__ import annotations

import json
from array import array
from collections.abc import Mapping, Sequence
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memstrata.errors import InvalidInput
from memstrata.runtime import Runtime
from memstrata.sealing import seal, unseal
from memstrata.storage.plan import Exec, Op, Query, Row
from memstrata.storage.records import from_micros

__all__ = [
    "TENANT_OWNER",
    "GraphItem",
    "delete_item",
    "get_items",
    "item_row",
    "join_namespace",
    "list_item_namespaces",
    "put_item",
    "seal_value",
    "search_items",
    "split_namespace",
]

_MAX_KEY = 1024
_MAX_VALUE_BYTES = 1_000_000
_SEP = "."


@dataclass(frozen=True, slots=True)
class GraphItem:
    """One stored item; ``vectors`` (field path -> vector) only when asked for."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None = None
    vectors: Mapping[str, list[float]] = field(default_factory=dict)


def join_namespace(namespace: Sequence[str]) -> str:
    labels = tuple(namespace)
    if not labels:
        raise InvalidInput("a namespace needs at least one label", field="namespace")
    for label in labels:
        if not isinstance(label, str) or not label or _SEP in label or "\x00" in label:
            raise InvalidInput(
                f"namespace labels are non-empty strings without {_SEP!r}: {labels!r}",
                field="namespace",
            )
    return _SEP.join(labels)


def split_namespace(text: str) -> tuple[str, ...]:
    return tuple(text.split(_SEP))


def _key(key: object) -> str:
    if not isinstance(key, str) or not key or len(key) > _MAX_KEY or "\x00" in key:
        raise InvalidInput(f"a key is a string of 1-{_MAX_KEY} characters", field="key")
    return key


def _packed(vector: Sequence[float]) -> bytes:
    return array("f", vector).tobytes()


def _unpacked(blob: object) -> list[float]:
    out = array("f")
    out.frombytes(bytes(blob))  # type: ignore[call-overload]
    return out.tolist()


_OWNER = "tenant_id = ? AND agent_id = ?"
_LIVE = "(expires_at IS NULL OR expires_at > ?)"
_COLUMNS = "namespace, item_key, value, created_at, updated_at, expires_at"


#: Items belong to a tenant (its users share the store), so under encryption at rest they
#: are sealed with the tenant's own data key: the keyring's owner (tenant, ""), a user
#: name no scope can have. Deleting a user does not reach them; deleting the items does.
TENANT_OWNER = ""


def item_row(agent: str, namespace: str, key: str) -> str:
    """What an item's sealed value is bound to: its agent, namespace and key."""
    return f"{agent}/{namespace}/{key}"


def seal_value(tenant: str, agent: str, namespace: str, key: str, text: str) -> str:
    """An item's value (JSON text) as stored: sealed with the tenant's key under
    encryption at rest (as it is when off)."""
    row = item_row(agent, namespace, key)
    return seal("graph_items.value", row, tenant, TENANT_OWNER, text) or text


def _item(
    agent: str, row: Row, vectors: Mapping[str, list[float]] | None = None
) -> GraphItem | None:
    """An item from a row of ``_COLUMNS`` (None once its value's key was destroyed: the
    item reads as absent)."""
    namespace, key, value, created_at, updated_at, expires_at = row
    text = unseal("graph_items.value", item_row(agent, namespace, key), value)
    if text is None:
        return None
    return GraphItem(
        namespace=split_namespace(namespace),
        key=key,
        value=json.loads(text),
        created_at=from_micros(created_at),
        updated_at=from_micros(updated_at),
        expires_at=None if expires_at is None else from_micros(expires_at),
        vectors=vectors or {},
    )


def _sweep(tenant: str, agent: str, now: int) -> Op[None]:
    expired = f"{_OWNER} AND expires_at IS NOT NULL AND expires_at <= ?"
    yield Exec(
        "DELETE FROM graph_item_vectors WHERE (tenant_id, agent_id, namespace, item_key) IN "
        f"(SELECT tenant_id, agent_id, namespace, item_key FROM graph_items WHERE {expired})",
        (tenant, agent, now),
    )
    yield Exec(f"DELETE FROM graph_items WHERE {expired}", (tenant, agent, now))


def put_item(
    rt: Runtime,
    tenant: str,
    agent: str,
    namespace: Sequence[str],
    key: str,
    value: Mapping[str, Any],
    *,
    ttl_s: float | None = None,
    vectors: Mapping[str, Sequence[float]] | None = None,
) -> Op[None]:
    """Store (replace) an item; ``created_at`` stays that of its first put."""
    ns, k = join_namespace(namespace), _key(key)
    if not isinstance(value, Mapping):
        raise InvalidInput("an item value is a JSON object", field="value")
    try:
        text = json.dumps(dict(value), ensure_ascii=False, separators=(",", ":"))
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"an item value must be JSON: {exc}", field="value") from None
    if len(text.encode()) > _MAX_VALUE_BYTES or "\\u0000" in text:
        raise InvalidInput(
            f"an item value is at most {_MAX_VALUE_BYTES} bytes, without NUL", field="value"
        )
    if ttl_s is not None and not 0 < ttl_s <= 10 * 365 * 86_400:
        raise InvalidInput("ttl must be > 0 and at most ten years", field="ttl")
    now = rt.clock()
    expires = None if ttl_s is None else now + int(ttl_s * 1_000_000)
    yield from _sweep(tenant, agent, now)
    yield Exec(
        "INSERT INTO graph_items (tenant_id, agent_id, namespace, item_key, value, created_at, "
        "updated_at, ttl_s, expires_at) VALUES (?, ?, ?, ?, ?, ?, ?, ?, ?) "
        "ON CONFLICT (tenant_id, agent_id, namespace, item_key) DO UPDATE SET "
        "value = excluded.value, updated_at = excluded.updated_at, ttl_s = excluded.ttl_s, "
        "expires_at = excluded.expires_at",
        (tenant, agent, ns, k, seal_value(tenant, agent, ns, k, text), now, now, ttl_s, expires),
    )
    where = f"{_OWNER} AND namespace = ? AND item_key = ?"
    yield Exec(f"DELETE FROM graph_item_vectors WHERE {where}", (tenant, agent, ns, k))
    for path, vector in (vectors or {}).items():
        yield Exec(
            "INSERT INTO graph_item_vectors (tenant_id, agent_id, namespace, item_key, "
            "field_path, vector) VALUES (?, ?, ?, ?, ?, ?)",
            (tenant, agent, ns, k, path, _packed(vector)),
        )


def delete_item(tenant: str, agent: str, namespace: Sequence[str], key: str) -> Op[None]:
    """Remove an item and its vectors (nothing to remove is not an error)."""
    args = (tenant, agent, join_namespace(namespace), _key(key))
    where = f"{_OWNER} AND namespace = ? AND item_key = ?"
    yield Exec(f"DELETE FROM graph_item_vectors WHERE {where}", args)
    yield Exec(f"DELETE FROM graph_items WHERE {where}", args)


def get_items(
    rt: Runtime,
    tenant: str,
    agent: str,
    keys: Sequence[tuple[Sequence[str], str]],
    *,
    refresh_ttl: bool = False,
) -> Op[list[GraphItem | None]]:
    """The live items at ``(namespace, key)``, in order (None where there is none).

    ``refresh_ttl`` pushes the expiry of each item found back by its own TTL.
    """
    now = rt.clock()
    out: list[GraphItem | None] = []
    for namespace, key in keys:
        args = (tenant, agent, join_namespace(namespace), _key(key))
        where = f"{_OWNER} AND namespace = ? AND item_key = ? AND {_LIVE}"
        if refresh_ttl:
            yield Exec(
                "UPDATE graph_items SET expires_at = ? + CAST(ttl_s * 1000000 AS BIGINT) "
                f"WHERE {where} AND ttl_s IS NOT NULL",
                (now, *args, now),
            )
        rows = yield Query(f"SELECT {_COLUMNS} FROM graph_items WHERE {where}", (*args, now))
        out.append(_item(agent, rows[0]) if rows else None)
    return out


def _live_under(
    alias: str, tenant: str, agent: str, prefix: Sequence[str], now: int
) -> tuple[str, list[object]]:
    """The WHERE clause (on table ``alias``) of live items under ``prefix``, and its args."""
    a = f"{alias}." if alias else ""
    where = f"{a}tenant_id = ? AND {a}agent_id = ? AND ({a}expires_at IS NULL OR {a}expires_at > ?)"
    params: list[object] = [tenant, agent, now]
    if prefix:
        ns = join_namespace(prefix)
        where += f" AND ({a}namespace = ? OR substr({a}namespace, 1, ?) = ?)"
        params.extend((ns, len(ns) + 1, ns + _SEP))
    return where, params


def search_items(
    rt: Runtime,
    tenant: str,
    agent: str,
    prefix: Sequence[str],
    *,
    with_vectors: bool = False,
    refresh_ttl: bool = False,
) -> Op[list[GraphItem]]:
    """Every live item whose namespace starts with ``prefix``, newest first.

    Filtering and ranking are the caller's (the values are JSON objects of any shape).
    """
    now = rt.clock()
    where, params = _live_under("", tenant, agent, prefix, now)
    if refresh_ttl:
        yield Exec(
            "UPDATE graph_items SET expires_at = ? + CAST(ttl_s * 1000000 AS BIGINT) "
            f"WHERE {where} AND ttl_s IS NOT NULL",
            (now, *params),
        )
    rows = yield Query(
        f"SELECT {_COLUMNS} FROM graph_items WHERE {where} ORDER BY updated_at DESC, item_key",
        params,
    )
    if not with_vectors or not rows:
        return [i for i in (_item(agent, r) for r in rows) if i is not None]
    joined, jparams = _live_under("i", tenant, agent, prefix, now)
    vrows = yield Query(
        "SELECT v.namespace, v.item_key, v.field_path, v.vector FROM graph_item_vectors v "
        "JOIN graph_items i ON i.tenant_id = v.tenant_id AND i.agent_id = v.agent_id "
        f"AND i.namespace = v.namespace AND i.item_key = v.item_key WHERE {joined}",
        jparams,
    )
    vectors: dict[tuple[str, str], dict[str, list[float]]] = {}
    for ns_text, key, path, blob in vrows:
        vectors.setdefault((ns_text, key), {})[path] = _unpacked(blob)
    found = (_item(agent, r, vectors.get((r[0], r[1]))) for r in rows)
    return [i for i in found if i is not None]


def list_item_namespaces(rt: Runtime, tenant: str, agent: str) -> Op[list[tuple[str, ...]]]:
    """Every namespace that holds a live item, sorted."""
    rows = yield Query(
        f"SELECT DISTINCT namespace FROM graph_items WHERE {_OWNER} AND {_LIVE} ORDER BY namespace",
        (tenant, agent, rt.clock()),
    )
    return [split_namespace(r[0]) for r in rows]
