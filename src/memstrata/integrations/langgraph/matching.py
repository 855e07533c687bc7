"""Values, filters and ranking of the LangGraph store (pure): the item value of a fact or
a working memory, the checks on a value put, filter conditions, keyword scores and the
order of search results."""

from __future__ import annotations

import re
from collections.abc import Iterator, Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from langgraph.store.base import Item, SearchItem

from memstrata.errors import InvalidInput
from memstrata.graph.items import GraphItem
from memstrata.integrations.langgraph.items import cosine
from memstrata.integrations.langgraph.namespaces import WORKING_KEY, Target
from memstrata.longterm.model import Fact
from memstrata.state import WorkingMemory

__all__ = [
    "FACT_MANAGED",
    "FACT_WRITABLE",
    "WORKING_MANAGED",
    "WORKING_WRITABLE",
    "Found",
    "by_similarity",
    "checked_fields",
    "fact_value",
    "found_fact",
    "found_item",
    "found_working",
    "passes",
    "ranked",
    "status_pushdown",
    "working_value",
]

FACT_WRITABLE = ("content", "category", "confidence", "source_error")
FACT_MANAGED = frozenset(
    {"id", "status", "origin", "agent", "superseded_by", "reason", "sources"}
    | {"created_at", "updated_at"}
)
WORKING_WRITABLE = ("content", "format", "json_schema", "template")
WORKING_MANAGED = frozenset({"version", "updated_at", "conversation_id", "scope"})
_OPERATORS = frozenset({"$eq", "$ne", "$gt", "$gte", "$lt", "$lte"})
_WORD = re.compile(r"\w+")


# -- values, filters, scores (pure) ----------------------------------------------------------


def fact_value(fact: Fact) -> dict[str, Any]:
    return {
        "content": fact.content,
        "category": fact.category,
        "confidence": fact.confidence,
        "status": fact.status.value,
        "origin": fact.origin.value,
        "source_error": fact.source_error,
        "superseded_by": fact.superseded_by,
        "reason": fact.reason,
        "sources": [
            {"conversation_id": s.conversation_id, "message_id": s.message_id} for s in fact.sources
        ],
    }


def working_value(wm: WorkingMemory) -> dict[str, Any]:
    value: dict[str, Any] = {"content": wm.content, "format": wm.format, "version": wm.version}
    if wm.json_schema is not None:
        value["json_schema"] = wm.json_schema
    if wm.template is not None:
        value["template"] = wm.template
    return value


def checked_fields(
    value: Mapping[str, Any], writable: tuple[str, ...], managed: frozenset[str], what: str
) -> dict[str, Any]:
    if not isinstance(value, Mapping):
        raise InvalidInput(f"a {what} value must be a mapping", field="value")
    unknown = sorted(set(value) - set(writable) - managed)
    if unknown:
        raise InvalidInput(
            f"unknown {what} fields {unknown}; writable: {', '.join(writable)}",
            field=unknown[0],
        )
    return {k: value[k] for k in writable if k in value}


def _compare(actual: Any, operator: str, expected: Any) -> bool:
    try:
        if operator == "$eq":
            return bool(actual == expected)
        if operator == "$ne":
            return bool(actual != expected)
        if operator == "$gt":
            return bool(actual > expected)
        if operator == "$gte":
            return bool(actual >= expected)
        if operator == "$lt":
            return bool(actual < expected)
        return bool(actual <= expected)
    except TypeError:  # e.g. a number against a string: no match, as in a JSON store
        return False


def _condition_holds(value: Mapping[str, Any], name: str, condition: Any) -> bool:
    ops = (
        condition
        if isinstance(condition, Mapping) and any(str(k).startswith("$") for k in condition)
        else {"$eq": condition}
    )
    for operator, expected in ops.items():
        if operator not in _OPERATORS:
            raise InvalidInput(
                f"filter operator {operator!r} is not one of {sorted(_OPERATORS)}", field="filter"
            )
        if name not in value:
            if operator != "$ne":
                return False
            continue
        if not _compare(value[name], operator, expected):
            return False
    return True


def passes(value: Mapping[str, Any], conditions: Mapping[str, Any]) -> bool:
    return all(_condition_holds(value, k, c) for k, c in conditions.items())


def _words(text: str) -> set[str]:
    return {w.casefold() for w in _WORD.findall(text)}


def _score(query_words: set[str], text: str) -> float:
    """The share of the query's words that occur in ``text`` (0..1)."""
    if not query_words:
        return 0.0
    return len(query_words & _words(text)) / len(query_words)


def status_pushdown(conditions: Mapping[str, Any]) -> tuple[str, dict[str, Any]]:
    """The ``status`` to ask memstrata for, and the conditions left for Python.

    No status in the filter means active facts only; ``"all"`` means every status.
    """
    rest = dict(conditions)
    if "status" not in rest:
        return "active", rest
    wanted = rest["status"]
    if wanted == "all":
        del rest["status"]
        return "all", rest
    if isinstance(wanted, str):
        return wanted, rest
    return "all", rest  # an operator: fetch every status, filter here


# -- the store -------------------------------------------------------------------------------


@dataclass(frozen=True, slots=True)
class Found:
    """An item before it becomes a LangGraph ``Item``/``SearchItem``, with its search text."""

    namespace: tuple[str, ...]
    key: str
    value: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    text: str
    vectors: Mapping[str, list[float]] = field(default_factory=dict)
    free: bool = False  # a free item: its vectors are stored (or it has none)

    def item(self) -> Item:
        return Item(
            value=self.value,
            key=self.key,
            namespace=self.namespace,
            created_at=self.created_at,
            updated_at=self.updated_at,
        )

    def search_item(self, score: float | None) -> SearchItem:
        return SearchItem(
            self.namespace, self.key, self.value, self.created_at, self.updated_at, score
        )


def found_fact(target: Target, fact: Fact) -> Found:
    return Found(
        target.namespace,
        fact.id,
        fact_value(fact),
        fact.created_at,
        fact.updated_at,
        fact.content,
    )


def found_working(target: Target, wm: WorkingMemory) -> Found:
    # Working memory keeps one timestamp, the latest write: it stands for both.
    return Found(
        target.namespace, WORKING_KEY, working_value(wm), wm.updated_at, wm.updated_at, wm.text
    )


def found_item(item: GraphItem) -> Found:
    return Found(
        item.namespace,
        item.key,
        item.value,
        item.created_at,
        item.updated_at,
        " ".join(_strings(item.value)),
        item.vectors,
        free=True,
    )


def _strings(value: Any) -> Iterator[str]:
    """The string leaves of a JSON value (what keyword search reads of a free item)."""
    if isinstance(value, str):
        yield value
    elif isinstance(value, Mapping):
        for v in value.values():
            yield from _strings(v)
    elif isinstance(value, list):
        for v in value:
            yield from _strings(v)


def _newest_first(found: list[Found]) -> list[Found]:
    return sorted(found, key=lambda f: f.updated_at, reverse=True)


def by_similarity(
    found: list[Found], query: list[float], text_vectors: Mapping[str, list[float]]
) -> list[SearchItem]:
    """Best cosine first (an item's best field); items with no vector after, newest first."""
    scored: list[tuple[float, Found]] = []
    scoreless: list[Found] = []
    for f in found:
        vectors = list(f.vectors.values()) if f.free else [text_vectors[f.text]]
        if vectors:
            scored.append((max(cosine(query, v) for v in vectors), f))
        else:
            scoreless.append(f)
    scored.sort(key=lambda sf: (sf[0], sf[1].updated_at), reverse=True)
    return [f.search_item(s) for s, f in scored] + [
        f.search_item(None) for f in _newest_first(scoreless)
    ]


def ranked(found: list[Found], query: str | None) -> list[SearchItem]:
    """Best keyword overlap first (then newest); without a query, newest first."""
    if not query:
        return [f.search_item(None) for f in _newest_first(found)]
    words = _words(query)
    scored = [(s, f) for f in found if (s := _score(words, f.text)) > 0]
    scored.sort(key=lambda sf: (sf[0], sf[1].updated_at), reverse=True)
    return [f.search_item(s) for s, f in scored]
