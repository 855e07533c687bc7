"""MemstrataStore against the real langgraph: a compiled graph using the store, and the
store's own contract (put/get/search/delete/list_namespaces, batch, isolation, errors)."""

from __future__ import annotations

import importlib
import sys
import uuid
from typing import TYPE_CHECKING, Any, TypedDict

import pytest

from lazy_names import lazy
from longterm_support import rule_extractor
from memstrata import AsyncMemory, Conflict, InvalidInput, Memory, MissingDependency, Scope
from memstrata.testing import FakeLLM
from support import Models

if TYPE_CHECKING:
    from langgraph.graph import END, START, StateGraph
    from langgraph.runtime import Runtime
    from langgraph.store.base import BaseStore, GetOp, Item, ListNamespacesOp, PutOp, SearchOp

    from memstrata.integrations.langgraph import MemstrataStore, facts_namespace, working_namespace
else:
    END, START, StateGraph = lazy("langgraph.graph", "END", "START", "StateGraph")
    (Runtime,) = lazy("langgraph.runtime", "Runtime")
    BaseStore, GetOp, Item, ListNamespacesOp, PutOp, SearchOp = lazy(
        "langgraph.store.base",
        "BaseStore",
        "GetOp",
        "Item",
        "ListNamespacesOp",
        "PutOp",
        "SearchOp",
    )
    MemstrataStore, facts_namespace, working_namespace = lazy(
        "memstrata.integrations.langgraph", "MemstrataStore", "facts_namespace", "working_namespace"
    )

U1, U2 = Scope("acme", "u1"), Scope("acme", "u2")


def key() -> str:
    return str(uuid.uuid4())


@pytest.fixture
def store(mem: Memory) -> MemstrataStore:
    return MemstrataStore(mem, "acme")


# -- a graph that remembers --------------------------------------------------------------------


class State(TypedDict, total=False):
    user: str
    said: str
    recalled: list[str]


def remember(state: State, runtime: Runtime[None]) -> dict[str, Any]:
    assert runtime.store is not None
    ns = facts_namespace(state["user"])
    runtime.store.put(ns, key(), {"content": state["said"], "category": "preference"})
    return {}


def recall(state: State, runtime: Runtime[None]) -> dict[str, Any]:
    assert runtime.store is not None
    hits = runtime.store.search(facts_namespace(state["user"]), query="tea")
    return {"recalled": [h.value["content"] for h in hits]}


def build(store: BaseStore) -> Any:
    graph = StateGraph(State)
    graph.add_node("remember", remember)
    graph.add_node("recall", recall)
    graph.add_edge(START, "remember")
    graph.add_edge("remember", "recall")
    graph.add_edge("recall", END)
    return graph.compile(store=store)


def test_a_graph_node_writes_facts_that_memstrata_serves(
    mem: Memory, store: MemstrataStore
) -> None:
    app = build(store)
    out = app.invoke({"user": "u1", "said": "Prefers green tea in the morning"})
    assert out["recalled"] == ["Prefers green tea in the morning"]

    (fact,) = mem.facts.list(U1).items
    assert (fact.content, fact.category, fact.origin.value) == (
        "Prefers green tea in the morning",
        "preference",
        "manual",
    )
    # ... and the context the model gets carries it.
    cid = mem.conversations.create(U1).id
    mem.messages.append(U1, cid, role="user", content="What should I drink?")
    memory_block = [
        m["content"] for m in mem.context(U1, cid).messages if "<memory>" in m["content"]
    ]
    assert len(memory_block) == 1
    assert "green tea" in memory_block[0]
    assert mem.facts.list(U2).items == []


@pytest.mark.anyio
async def test_a_graph_runs_async_on_the_async_facade(mem: Memory, amem: AsyncMemory) -> None:
    app = build(MemstrataStore(mem, "acme", async_memory=amem))
    out = await app.ainvoke({"user": "u2", "said": "Drinks tea, never coffee"})
    assert out["recalled"] == ["Drinks tea, never coffee"]
    assert [f.content for f in mem.facts.list(U2).items] == ["Drinks tea, never coffee"]


# -- facts ---------------------------------------------------------------------------------------


def test_put_get_edit_and_delete_a_fact_by_its_key(mem: Memory, store: MemstrataStore) -> None:
    ns, k = facts_namespace("u1"), key()
    store.put(ns, k, {"content": "Lives in Lyon", "category": "context", "confidence": 0.8})

    item = store.get(ns, k)
    assert item is not None
    assert (item.namespace, item.key) == (ns, k)
    assert item.value["content"] == "Lives in Lyon"
    assert (item.value["confidence"], item.value["status"]) == (0.8, "active")
    assert mem.facts.get(U1, k).content == "Lives in Lyon"  # the key is the fact id

    changed = dict(item.value, content="Lives in Grenoble")  # read, change, write back
    store.put(ns, k, changed)
    assert mem.facts.get(U1, k).content == "Lives in Grenoble"
    store.put(ns, k, changed)  # unchanged: no new version
    store.put(ns, k, dict(changed, content=" Lives  in Grenoble "))  # same once normalised
    events = [e.event for e in mem.facts.history(U1, k)]
    assert events.count("edited") == 1

    store.delete(ns, k)
    assert store.get(ns, k) is None
    assert mem.facts.list(U1, status="all").items == []
    store.delete(ns, k)  # deleting again is a no-op


def test_facts_added_through_memstrata_are_items(mem: Memory, store: MemstrataStore) -> None:
    fact = mem.facts.add(U1, "Allergic to peanuts", category="knowledge", confidence=0.95)
    item = store.get(facts_namespace("u1"), fact.id)
    assert item is not None
    assert item.value["content"] == "Allergic to peanuts"
    assert store.get(facts_namespace("u1"), "not-a-uuid") is None
    assert store.get(facts_namespace("u1"), key()) is None


@pytest.mark.parametrize(
    ("k", "value", "field"),
    [
        ("not-a-uuid", {"content": "x"}, "key"),
        (None, {"content": "x", "mood": "happy"}, "mood"),
        (None, {"content": "x", "status": "removed"}, "status"),
        (None, {"category": "context"}, "content"),
        (None, {"content": "x", "category": "gossip"}, "category"),
        (None, {"content": "x", "confidence": 2}, "confidence"),
    ],
)
def test_bad_fact_values_are_refused(
    store: MemstrataStore, k: str | None, value: dict[str, Any], field: str
) -> None:
    with pytest.raises(InvalidInput) as info:
        store.put(facts_namespace("u1"), k or key(), value)
    assert info.value.detail.get("field") == field


def test_facts_take_no_ttl_and_no_index_fields(store: MemstrataStore) -> None:
    ns = facts_namespace("u1")
    with pytest.raises(InvalidInput, match="expire"):
        store.put(ns, key(), {"content": "x"}, ttl=5.0)
    with pytest.raises(InvalidInput, match="index"):
        store.put(ns, key(), {"content": "x"}, index=["content"])
    store.put(ns, key(), {"content": "not indexed"}, index=False)  # asking for less is fine
    assert len(store.search(ns)) == 1


def test_search_filters_ranks_and_pages(mem: Memory, store: MemstrataStore) -> None:
    ns = facts_namespace("u1")
    store.put(ns, key(), {"content": "Drinks green tea", "category": "preference"})
    store.put(ns, key(), {"content": "Works as a nurse", "category": "context", "confidence": 0.7})
    store.put(ns, key(), {"content": "Likes tea with milk and honey", "confidence": 0.9})

    assert [i.value["content"] for i in store.search(ns)] == [
        "Likes tea with milk and honey",
        "Works as a nurse",
        "Drinks green tea",
    ]  # newest first
    assert all(i.score is None for i in store.search(ns))

    hits = store.search(ns, query="green tea")
    assert [(i.value["content"], i.score) for i in hits] == [
        ("Drinks green tea", 1.0),
        ("Likes tea with milk and honey", 0.5),
    ]
    assert store.search(ns, query="astronomy") == []

    assert [i.value["content"] for i in store.search(ns, filter={"category": "preference"})] == [
        "Drinks green tea"
    ]
    high = store.search(ns, filter={"confidence": {"$gte": 0.9}})
    assert sorted(i.value["content"] for i in high) == [
        "Drinks green tea",
        "Likes tea with milk and honey",
    ]
    assert len(store.search(ns, filter={"status": "all"})) == 3
    assert store.search(ns, filter={"status": "superseded"}) == []
    with pytest.raises(InvalidInput):
        store.search(ns, filter={"confidence": {"$in": [1]}})

    page = store.search(ns, limit=1, offset=1)
    assert [i.value["content"] for i in page] == ["Works as a nurse"]


def test_superseded_facts_are_history_shown_only_when_asked(
    mem: Memory, store: MemstrataStore, models: Models
) -> None:
    models(mem, facts_llm=FakeLLM(rule_extractor), facts_embedder=None)
    cid = mem.conversations.create(U1).id
    for said in ("I like coffee", "I no longer like coffee"):
        mem.messages.append(U1, cid, role="user", content=said)
        mem.messages.append(U1, cid, role="assistant", content="noted")
        mem.longterm.flush(U1, cid)
    ns = facts_namespace("u1")

    assert [i.value["content"] for i in store.search(ns)] == ["User no longer likes coffee"]
    (old,) = store.search(ns, filter={"status": "superseded"})
    assert old.value["content"] == "User likes coffee"
    assert old.value["superseded_by"] is not None
    assert len(store.search(ns, filter={"status": "all"})) == 2
    assert len(store.search(ns, filter={"status": {"$ne": "active"}})) == 1
    assert store.get(ns, old.key) is not None  # get answers whatever the status
    assert old.value["sources"][0]["conversation_id"] == cid

    with pytest.raises(Conflict):  # memstrata edits only active facts
        store.put(ns, old.key, dict(old.value, content="User likes tea"))
    with pytest.raises(InvalidInput):  # and the status is not the caller's to set
        store.put(ns, old.key, dict(old.value, status="active"))


# -- working memory ------------------------------------------------------------------------------


def test_working_memory_is_one_document_under_the_key_content(
    mem: Memory, store: MemstrataStore
) -> None:
    ns = working_namespace("u1")
    assert store.get(ns, "content") is None
    store.put(ns, "content", {"content": "# User\n- prefers tea"})
    item = store.get(ns, "content")
    assert item is not None
    assert item.value == {"content": "# User\n- prefers tea", "format": "markdown", "version": 1}
    assert mem.working.get(U1).content == "# User\n- prefers tea"

    store.put(ns, "content", dict(item.value, content="# User\n- prefers coffee"))
    assert mem.working.get(U1).version == 2
    assert store.get(ns, "other") is None
    with pytest.raises(InvalidInput):
        store.put(ns, "other", {"content": "x"})
    with pytest.raises(InvalidInput):
        store.put(ns, "content", {"text": "x"})

    store.delete(ns, "content")
    assert store.get(ns, "content") is None
    store.delete(ns, "content")  # no-op


def test_conversation_working_memory_holds_json(mem: Memory, store: MemstrataStore) -> None:
    cid = mem.conversations.create(U1).id
    ns = working_namespace("u1", cid)
    store.put(ns, "content", {"content": {"task": "book a flight", "step": 2}})
    item = store.get(ns, "content")
    assert item is not None
    assert item.value["format"] == "json"
    assert mem.working.get(U1, conversation_id=cid).content == {"task": "book a flight", "step": 2}
    hits = store.search(("users", "u1"), query="flight")
    assert [(h.namespace, h.key) for h in hits] == [(ns, "content")]


# -- namespaces ----------------------------------------------------------------------------------


def fill(mem: Memory, store: MemstrataStore) -> str:
    store.put(facts_namespace("u1"), key(), {"content": "Plays the cello"})
    store.put(working_namespace("u1"), "content", {"content": "notes"})
    cid = mem.conversations.create(U2).id
    store.put(working_namespace("u2", cid), "content", {"content": "draft"})
    mem.conversations.create(U2)  # a conversation without working memory: no namespace
    return cid


def test_list_namespaces(mem: Memory, store: MemstrataStore) -> None:
    cid = fill(mem, store)
    everything = [
        ("users", "u1", "facts"),
        ("users", "u1", "working"),
        ("users", "u2", "working", cid),
    ]
    assert store.list_namespaces() == everything
    assert store.list_namespaces(prefix=("users", "u1")) == everything[:2]
    assert store.list_namespaces(suffix=("facts",)) == everything[:1]
    assert store.list_namespaces(prefix=("users", "*", "working")) == everything[1:]
    assert store.list_namespaces(max_depth=2) == [("users", "u1"), ("users", "u2")]
    assert store.list_namespaces(limit=1, offset=1) == everything[1:2]
    assert store.list_namespaces(prefix=("assistants",)) == []


def test_namespaces_outside_the_mapping_are_free_items(store: MemstrataStore) -> None:
    store.put(("memories", "u1"), "k", {"content": "x"})
    item = store.get(("memories", "u1"), "k")
    assert item is not None
    assert item.value == {"content": "x"}
    assert [i.key for i in store.search(("memories",))] == ["k"]
    store.delete(("memories", "u1"), "k")
    assert store.get(("memories", "u1"), "k") is None
    assert store.search(("memories",)) == []


def test_users_and_tenants_are_isolated(mem: Memory, store: MemstrataStore) -> None:
    k = key()
    store.put(facts_namespace("u1"), k, {"content": "Private fact"})
    assert store.get(facts_namespace("u2"), k) is None
    assert store.search(facts_namespace("u2")) == []
    with pytest.raises(Conflict):  # the id is taken, by someone else: never overwritten
        store.put(facts_namespace("u2"), k, {"content": "Hijack"})
    assert mem.facts.get(U1, k).content == "Private fact"
    store.delete(facts_namespace("u2"), k)
    assert store.get(facts_namespace("u1"), k) is not None

    other = MemstrataStore(mem, "globex")
    assert other.list_namespaces() == []
    assert other.search(()) == []
    assert [i.value["content"] for i in store.search(())] == ["Private fact"]


def test_an_agent_store_sees_only_that_agent(mem: Memory) -> None:
    plain, agent = MemstrataStore(mem, "acme"), MemstrataStore(mem, "acme", agent="planner")
    agent.put(facts_namespace("u1"), key(), {"content": "Planner-only fact"})
    assert plain.search(facts_namespace("u1")) == []
    assert [f.content for f in mem.facts.list(Scope("acme", "u1", "planner")).items] == [
        "Planner-only fact"
    ]


# -- batches -------------------------------------------------------------------------------------


def test_batch_runs_ops_in_order_and_answers_each(store: MemstrataStore) -> None:
    ns, k = facts_namespace("u1"), key()
    results = store.batch(
        [
            PutOp(ns, k, {"content": "First"}),
            GetOp(ns, k),
            PutOp(ns, k, {"content": "Second"}),
            SearchOp(ns),
            ListNamespacesOp(),
            PutOp(ns, k, None),
            GetOp(ns, k),
        ]
    )
    assert [results[i] for i in (0, 2, 5, 6)] == [None] * 4
    got, found = results[1], results[3]
    assert isinstance(got, Item)
    assert got.value["content"] == "First"
    assert isinstance(found, list)
    assert [i.value["content"] for i in found if isinstance(i, Item)] == ["Second"]
    assert results[4] == [ns]


@pytest.mark.anyio
@pytest.mark.parametrize("use_async", [True, False], ids=["async-facade", "thread"])
async def test_abatch(mem: Memory, amem: AsyncMemory, use_async: bool) -> None:
    store = MemstrataStore(mem, "acme", async_memory=amem if use_async else None)
    ns, k = facts_namespace("u1"), key()
    await store.aput(ns, k, {"content": "Async fact", "confidence": 0.75})
    item = await store.aget(ns, k)
    assert item is not None
    assert item.value["confidence"] == 0.75
    assert [i.key for i in await store.asearch(ns, query="async")] == [k]
    assert await store.alist_namespaces() == [ns]
    await store.aput(working_namespace("u1"), "content", {"content": "wm"})
    await store.adelete(ns, k)
    assert await store.aget(ns, k) is None
    assert mem.working.get(U1).content == "wm"


def test_missing_langgraph_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langgraph.store.base", None)
    monkeypatch.delitem(sys.modules, "memstrata.integrations.langgraph")
    with pytest.raises(MissingDependency, match=r"memstrata\[langgraph\]"):
        importlib.import_module("memstrata.integrations.langgraph")
