"""MemstrataSaver and AsyncMemstrataSaver with real compiled graphs: a graph resumes
from a memstrata checkpoint in a new process, a graph's messages are a memstrata
conversation whose branches follow forked checkpoints, scopes keep threads apart, and
deleting a user deletes their checkpoints."""

from __future__ import annotations

import importlib
import operator
import os
import subprocess
import sys
import textwrap
from pathlib import Path
from typing import TYPE_CHECKING, Annotated, Any, TypedDict

import pytest

from lazy_names import lazy
from memstrata import AsyncMemory, Memory, Scope
from memstrata.config import Settings

if TYPE_CHECKING:
    from langchain_core.messages import AIMessage, AnyMessage, HumanMessage
    from langgraph.graph import END, START, MessagesState, StateGraph

    from memstrata.integrations.langgraph import AsyncMemstrataSaver, MemstrataSaver
    from memstrata.integrations.threads import conversation_id_for
else:
    AIMessage, AnyMessage, HumanMessage = lazy(
        "langchain_core.messages", "AIMessage", "AnyMessage", "HumanMessage"
    )
    END, START, MessagesState, StateGraph = lazy(
        "langgraph.graph", "END", "START", "MessagesState", "StateGraph"
    )
    AsyncMemstrataSaver, MemstrataSaver = lazy(
        "memstrata.integrations.langgraph", "AsyncMemstrataSaver", "MemstrataSaver"
    )
    (conversation_id_for,) = lazy("memstrata.integrations.threads", "conversation_id_for")

SCOPE = Scope("acme", "u1")

# The graph both processes build: "plan" runs, the run stops before "act", and a
# later invoke (anywhere) picks it up from the stored checkpoint.
GRAPH = textwrap.dedent(
    """
    import operator, sys
    from typing import Annotated, TypedDict
    from langgraph.graph import END, START, StateGraph
    from memstrata import Memory, Scope
    from memstrata.config import Settings
    from memstrata.integrations.langgraph import MemstrataSaver

    class State(TypedDict):
        steps: Annotated[list[str], operator.add]

    def build(mem):
        g = StateGraph(State)
        g.add_node("plan", lambda s: {"steps": ["planned"]})
        g.add_node("act", lambda s: {"steps": [f"acted after {len(s['steps'])}"]})
        g.add_edge(START, "plan")
        g.add_edge("plan", "act")
        g.add_edge("act", END)
        saver = MemstrataSaver(mem, Scope("acme", "u1"))
        return g.compile(checkpointer=saver, interrupt_before=["act"])

    if __name__ == "__main__":
        url, home, thread = sys.argv[1:4]
        with Memory.open(url, settings=Settings(home=home, worker="off")) as mem:
            graph = build(mem)
            config = {"configurable": {"thread_id": thread}}
            before = graph.get_state(config)
            print("next:", list(before.next))
            out = graph.invoke(None, config)
            print("steps:", out["steps"])
    """
)


def _run(script: Path, *args: str) -> str:
    done = subprocess.run(
        [sys.executable, str(script), *args],
        env=dict(os.environ),
        capture_output=True,
        text=True,
        timeout=120,
        check=False,
    )
    assert done.returncode == 0, done.stderr
    return done.stdout


def test_a_graph_resumes_from_a_memstrata_checkpoint_in_a_new_process(tmp_path: Path) -> None:
    script = tmp_path / "graph.py"
    script.write_text(GRAPH)
    url = f"sqlite:///{tmp_path / 'graph.db'}"
    sys.path.insert(0, str(tmp_path))
    try:
        module = importlib.import_module("graph")  # the same definition the new process uses
    finally:
        sys.path.remove(str(tmp_path))
        sys.modules.pop("graph", None)

    config: Any = {"configurable": {"thread_id": "job/42"}}  # any string thread id
    with Memory.open(url, settings=Settings(home=tmp_path, worker="off")) as mem:
        graph = module.build(mem)
        assert graph.invoke({"steps": []}, config) == {"steps": ["planned"]}  # stopped
        assert list(graph.get_state(config).next) == ["act"]

    out = _run(script, url, str(tmp_path), "job/42")
    assert "next: ['act']" in out
    assert "steps: ['planned', 'acted after 1']" in out

    with Memory.open(url, settings=Settings(home=tmp_path, worker="off")) as mem:
        state = module.build(mem).get_state(config)
        assert state.values == {"steps": ["planned", "acted after 1"]}
        assert not state.next


def _chat_graph(saver: MemstrataSaver | AsyncMemstrataSaver) -> Any:
    def reply(state: MessagesState) -> dict[str, list[AnyMessage]]:
        last = state["messages"][-1]
        return {"messages": [AIMessage(f"you said: {last.content}")]}

    g = StateGraph(MessagesState)
    g.add_node("reply", reply)
    g.add_edge(START, "reply")
    g.add_edge("reply", END)
    return g.compile(checkpointer=saver)


def _contents(mem: Memory, thread: str, leaf: str | None = None) -> list[str]:
    return [m.content for m in mem.messages.path(SCOPE, conversation_id_for(SCOPE, thread), leaf)]


def test_messages_state_is_a_conversation_and_forks_are_branches(mem: Memory) -> None:
    saver = MemstrataSaver(mem, SCOPE)
    graph = _chat_graph(saver)
    config: Any = {"configurable": {"thread_id": "chat-1"}}
    graph.invoke({"messages": [HumanMessage("hello")]}, config)
    after_first = graph.get_state(config).config
    graph.invoke({"messages": [HumanMessage("how are you")]}, config)
    assert _contents(mem, "chat-1") == [
        "hello",
        "you said: hello",
        "how are you",
        "you said: how are you",
    ]
    assert saver.conversation_id("chat-1") == conversation_id_for(SCOPE, "chat-1")

    # Resume from the checkpoint after the first turn with another question: a fork.
    graph.invoke({"messages": [HumanMessage("what is 2+2")]}, after_first)
    cid = saver.conversation_id("chat-1")
    leaves = mem.messages.leaves(SCOPE, cid).items
    assert len(leaves) == 2
    branches = sorted(_contents(mem, "chat-1", leaf.id) for leaf in leaves)
    assert branches == [
        ["hello", "you said: hello", "how are you", "you said: how are you"],
        ["hello", "you said: hello", "what is 2+2", "you said: what is 2+2"],
    ]
    # The shared turn is stored once, not once per branch.
    assert len(mem.messages.list(SCOPE, cid).items) == 6
    # The active branch is the newest run's.
    assert _contents(mem, "chat-1")[-1] == "you said: what is 2+2"


def test_mirroring_can_be_turned_off(mem: Memory) -> None:
    graph = _chat_graph(MemstrataSaver(mem, SCOPE, mirror_messages=False))
    graph.invoke({"messages": [HumanMessage("hi")]}, {"configurable": {"thread_id": "quiet"}})
    assert mem.conversations.list(SCOPE).items == []


class Counter(TypedDict):
    n: Annotated[int, operator.add]


def _counter(saver: MemstrataSaver | AsyncMemstrataSaver) -> Any:
    g = StateGraph(Counter)
    g.add_node("inc", lambda s: {"n": 1})
    g.add_edge(START, "inc")
    g.add_edge("inc", END)
    return g.compile(checkpointer=saver)


@pytest.mark.anyio
async def test_the_async_saver_runs_a_graph_and_serves_sync_reads(amem: AsyncMemory) -> None:
    saver = AsyncMemstrataSaver(amem, SCOPE)
    graph = _counter(saver)
    config: Any = {"configurable": {"thread_id": "t"}}
    await graph.ainvoke({"n": 0}, config)
    out = await graph.ainvoke({"n": 0}, config)
    assert out == {"n": 2}
    history = [s async for s in graph.aget_state_history(config)]
    assert len(history) == 6  # per run: the input, then one after each of two steps
    assert (await graph.aget_state(config)).values == {"n": 2}


def test_scopes_keep_threads_apart_and_a_deleted_user_takes_theirs(mem: Memory) -> None:
    config: Any = {"configurable": {"thread_id": "shared-name"}}
    mine = _counter(MemstrataSaver(mem, SCOPE))
    theirs = _counter(MemstrataSaver(mem, Scope("acme", "u2")))
    mine.invoke({"n": 0}, config)
    mine.invoke({"n": 0}, config)
    theirs.invoke({"n": 0}, config)
    assert mine.get_state(config).values == {"n": 2}
    assert theirs.get_state(config).values == {"n": 1}

    mem.users.delete(SCOPE)
    assert mine.get_state(config).values == {}
    assert theirs.get_state(config).values == {"n": 1}


def test_list_filters_by_metadata_and_pages_past_one_page(mem: Memory) -> None:
    saver = MemstrataSaver(mem, SCOPE)
    graph = _counter(saver)
    config: Any = {"configurable": {"thread_id": "long"}}
    for _ in range(60):  # 180 checkpoints (3 a run): more than one page of the store
        graph.invoke({"n": 0}, config)
    every = list(saver.list(config))
    assert len(every) == 180
    ids = [t.config["configurable"]["checkpoint_id"] for t in every]
    assert ids == sorted(ids, reverse=True)
    inputs = list(saver.list(config, filter={"source": "input"}))
    assert len(inputs) == 60
    assert all(t.metadata["source"] == "input" for t in inputs)
    assert len(list(saver.list(config, filter={"source": "loop"}, limit=7))) == 7
    older = list(saver.list(config, before=every[100].config))
    assert [t.config for t in older] == [t.config for t in every[101:]]
    assert [t.config for t in saver.list(None, limit=2)] == [t.config for t in every[:2]]
