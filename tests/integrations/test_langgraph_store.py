"""MemstrataStore's free namespaces: any tuple of labels and any string key, checked
against LangGraph's own InMemoryStore op for op; LangGraph's ("memories", user_id)
pattern inside a graph; semantic search with the memory's default embedder (offline
MiniLM) and with the embeddings an IndexConfig names; TTLs; batch and abatch."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any, cast

import pytest

from lazy_names import lazy
from memstrata import AsyncMemory, InvalidInput, Memory
from memstrata.types import Scope

if TYPE_CHECKING:
    from langchain_core.messages import HumanMessage
    from langgraph.graph import END, START, MessagesState, StateGraph
    from langgraph.runtime import Runtime
    from langgraph.store.base import BaseStore, GetOp, Item, Op, PutOp, SearchItem, SearchOp
    from langgraph.store.memory import InMemoryStore

    from memstrata.integrations.langgraph import MemstrataSaver, MemstrataStore, facts_namespace
else:
    (HumanMessage,) = lazy("langchain_core.messages", "HumanMessage")
    END, START, MessagesState, StateGraph = lazy(
        "langgraph.graph", "END", "START", "MessagesState", "StateGraph"
    )
    (Runtime,) = lazy("langgraph.runtime", "Runtime")
    BaseStore, GetOp, Item, Op, PutOp, SearchItem, SearchOp = lazy(
        "langgraph.store.base",
        "BaseStore",
        "GetOp",
        "Item",
        "Op",
        "PutOp",
        "SearchItem",
        "SearchOp",
    )
    (InMemoryStore,) = lazy("langgraph.store.memory", "InMemoryStore")
    MemstrataSaver, MemstrataStore, facts_namespace = lazy(
        "memstrata.integrations.langgraph", "MemstrataSaver", "MemstrataStore", "facts_namespace"
    )

WRITES: list[tuple[tuple[str, ...], str, dict[str, Any] | None]] = [
    (("memories", "u1"), "food", {"text": "likes ramen", "n": 1}),
    (("memories", "u1"), "hobby", {"text": "plays chess", "n": 2}),
    (("memories", "u2"), "food", {"text": "vegetarian", "n": 3}),
    (("memories", "u2"), "drink", {"text": "green tea", "n": 4}),
    (("docs",), "readme", {"text": "hello", "tags": ["a", "b"]}),
    (("docs", "v2", "api"), "page one/ä", {"text": "nested", "n": 5}),
    (("memories", "u1"), "food", {"text": "likes udon now", "n": 6}),  # an overwrite
    (("memories", "u2"), "food", None),  # a delete
    (("a", "b", "c", "d"), "k", {"n": 7}),
]


@pytest.fixture
def pair(mem: Memory) -> tuple[MemstrataStore, InMemoryStore]:
    ours, theirs = MemstrataStore(mem, "acme"), InMemoryStore()
    for store in (ours, theirs):
        for ns, key, value in WRITES:
            if value is None:
                store.delete(ns, key)
            else:
                store.put(ns, key, value)
    return ours, theirs


def _items(results: list[Any]) -> list[tuple[tuple[str, ...], str, dict[str, Any]]]:
    return sorted((tuple(i.namespace), i.key, i.value) for i in results)


@pytest.mark.parametrize(
    ("namespace", "key"),
    [(ns, key) for ns, key, _ in WRITES] + [(("memories",), "food"), (("nope",), "x")],
)
def test_get_matches_langgraphs_in_memory_store(
    pair: tuple[BaseStore, BaseStore], namespace: tuple[str, ...], key: str
) -> None:
    ours, theirs = (s.get(namespace, key) for s in pair)
    assert (ours and ours.value) == (theirs and theirs.value)
    if ours is not None and theirs is not None:
        assert (ours.namespace, ours.key) == (theirs.namespace, theirs.key)


@pytest.mark.parametrize(
    ("prefix", "filter"),
    [
        ((), None),
        (("memories",), None),
        (("memories", "u1"), None),
        (("docs",), None),
        (("doc",), None),  # a label prefix is not a namespace prefix
        (("memories",), {"n": 6}),
        (("memories",), {"n": {"$gt": 2}}),
        ((), {"text": "hello"}),
    ],
)
def test_search_matches_langgraphs_in_memory_store(
    pair: tuple[BaseStore, BaseStore], prefix: tuple[str, ...], filter: dict[str, Any] | None
) -> None:
    ours, theirs = (s.search(prefix, filter=filter, limit=100) for s in pair)
    assert _items(ours) == _items(theirs)


@pytest.mark.parametrize(
    "kwargs",
    [
        {},
        {"prefix": ("memories",)},
        {"suffix": ("api",)},
        {"prefix": ("docs", "*", "api")},
        {"max_depth": 1},
        {"max_depth": 2, "prefix": ("docs",)},
        {"limit": 2, "offset": 1},
    ],
)
def test_list_namespaces_matches_langgraphs_in_memory_store(
    pair: tuple[BaseStore, BaseStore], kwargs: dict[str, Any]
) -> None:
    ours, theirs = (s.list_namespaces(**kwargs) for s in pair)
    assert ours == theirs


def test_search_without_a_query_is_newest_first_and_pages(
    pair: tuple[MemstrataStore, InMemoryStore],
) -> None:
    ours = pair[0]
    keys = [(i.namespace, i.key) for i in ours.search(())]
    assert keys[0] == (("a", "b", "c", "d"), "k")
    assert keys[1] == (("memories", "u1"), "food")  # overwritten after the docs
    assert [(i.namespace, i.key) for i in ours.search((), limit=2, offset=1)] == keys[1:3]


def test_the_memories_pattern_of_langgraph_works_in_a_graph(mem: Memory) -> None:
    store = MemstrataStore(mem, "acme")

    def remember(state: MessagesState, runtime: Runtime[Any]) -> dict[str, Any]:
        assert runtime.store is not None
        user = "user-42"  # any string, not only a UUID
        namespace = ("memories", user)
        runtime.store.put(namespace, str(uuid.uuid4()), {"data": state["messages"][-1].content})
        seen = [m.value["data"] for m in runtime.store.search(namespace)]
        return {"messages": [("ai", f"I remember {len(seen)} things")]}

    g = StateGraph(MessagesState)
    g.add_node("remember", remember)
    g.add_edge(START, "remember")
    g.add_edge("remember", END)
    graph = g.compile(checkpointer=MemstrataSaver(mem, Scope("acme", "user-42")), store=store)
    config: Any = {"configurable": {"thread_id": "1"}}
    graph.invoke({"messages": [HumanMessage("I like jazz")]}, config)
    out = graph.invoke({"messages": [HumanMessage("I live in Oslo")]}, config)
    assert out["messages"][-1].content == "I remember 2 things"
    assert sorted(i.value["data"] for i in store.search(("memories", "user-42"))) == [
        "I like jazz",
        "I live in Oslo",
    ]


NOTES = {
    "cello": "My daughter started cello lessons at the music school",
    "hike": "We went hiking in the mountains last weekend",
    "tax": "The tax forms are due at the end of April",
}


def test_semantic_search_with_the_default_embedder(mem: Memory) -> None:
    store = MemstrataStore(mem, "acme", index={"dims": 384, "fields": ["text"]})
    for key, text in NOTES.items():
        store.put(("notes", "u1"), key, {"text": text, "kind": "note"})
    store.put(facts_namespace("u1"), str(uuid.uuid4()), {"content": "Pays taxes in Norway"})
    hits = store.search(("notes",), query="my kid's instrument practice")
    assert hits[0].key == "cello"  # no word in common with the query
    assert all(h.score is not None for h in hits)
    assert [h.score for h in hits] == sorted((h.score or 0.0 for h in hits), reverse=True)

    everything = store.search((), query="filing income tax returns", limit=2)
    assert {h.key for h in everything} >= {"tax"}
    assert {tuple(h.namespace) for h in everything} == {("notes", "u1"), facts_namespace("u1")}

    store.put(("notes", "u1"), "plain", {"text": "not embedded"}, index=False)
    last = store.search(("notes",), query="cello")[-1]
    assert (last.key, last.score) == ("plain", None)  # no vector: after the scored ones


def test_semantic_search_with_the_embeddings_the_config_names(mem: Memory) -> None:
    def embed(texts: Sequence[str]) -> list[list[float]]:
        return [[float("cello" in t.lower()), float("tax" in t.lower()), 1.0] for t in texts]

    store = MemstrataStore(mem, "acme", index={"dims": 3, "embed": embed, "fields": ["text"]})
    for key, text in NOTES.items():
        store.put(("notes",), key, {"text": text})
    assert store.search(("notes",), query="tax")[0].key == "tax"
    wrong = MemstrataStore(mem, "acme", index={"dims": 4, "embed": embed})
    with pytest.raises(InvalidInput, match="dims"):
        wrong.put(("notes",), "x", {"text": "x"})


class Clock:
    def __init__(self, mem: Memory) -> None:
        self.now = mem.core.rt.clock()
        mem.core.rt.clock = lambda: self.now

    def advance(self, minutes: float) -> None:
        self.now += int(minutes * 60_000_000)


def test_ttls_expire_items_and_reads_push_them_back(mem: Memory) -> None:
    clock = Clock(mem)
    store = MemstrataStore(mem, "acme", ttl={"default_ttl": 10, "refresh_on_read": True})
    store.put(("s",), "kept", {"v": 1})  # the default: 10 minutes
    store.put(("s",), "short", {"v": 2}, ttl=1)
    store.put(("s",), "forever", {"v": 3}, ttl=None)
    clock.advance(2)
    assert store.get(("s",), "short") is None
    assert sorted(i.key for i in store.search(("s",))) == ["forever", "kept"]
    clock.advance(7)  # 9 minutes in; the search above pushed "kept" to 12
    assert store.get(("s",), "kept", refresh_ttl=False) is not None
    clock.advance(2.5)  # 11.5
    assert store.get(("s",), "kept", refresh_ttl=False) is not None
    clock.advance(1)  # 12.5: past the pushed-back expiry
    assert store.get(("s",), "kept") is None
    assert store.list_namespaces() == [("s",)]
    clock.advance(10_000)
    assert [i.key for i in store.search(("s",))] == ["forever"]
    with pytest.raises(InvalidInput, match="ttl"):
        store.put(("s",), "x", {"v": 1}, ttl=-1)


def test_batch_and_abatch_run_mixed_ops(mem: Memory, amem: AsyncMemory) -> None:
    import anyio

    store = MemstrataStore(mem, "acme", async_memory=amem)
    ops: list[Op] = [
        PutOp(("b",), "one", {"v": 1}),
        PutOp(facts_namespace("u1"), str(uuid.uuid4()), {"content": "Owns a bike"}),
        GetOp(("b",), "one"),
        SearchOp(("b",)),
    ]
    results = store.batch(ops)
    assert results[:2] == [None, None]
    got = cast(Item | None, results[2])  # a GetOp's result
    assert got is not None
    assert got.value == {"v": 1}
    assert [i.key for i in cast(list[SearchItem], results[3])] == ["one"]  # a SearchOp's

    async def run() -> list[Any]:
        return await store.abatch([PutOp(("b",), "two", {"v": 2}), SearchOp(("b",))])

    _, found = anyio.run(run)
    assert sorted(i.key for i in found) == ["one", "two"]


def test_bad_namespaces_and_values_are_refused(mem: Memory) -> None:
    store = MemstrataStore(mem, "acme")
    with pytest.raises(InvalidInput):
        store.batch([PutOp(("a.b",), "k", {"v": 1})])
    with pytest.raises(InvalidInput):
        store.batch([PutOp(("a",), "k", {"v": object()})])
    with pytest.raises(InvalidInput):
        store.batch([PutOp(("a",), "", {"v": 1})])
