"""LangGraph on memstrata: a chat graph whose checkpoints, messages and long-term notes
live in one memstrata store. Runs offline: the model is LangChain's fake chat model.

    python examples/langgraph_memory.py
"""

from __future__ import annotations

import uuid
from typing import Any

from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
from langchain_core.messages import AIMessage
from langgraph.graph import START, MessagesState, StateGraph
from langgraph.runtime import Runtime

from memstrata import Memory, Scope
from memstrata.integrations.langgraph import MemstrataSaver, MemstrataStore

URL = "sqlite:///langgraph-demo.db"
scope = Scope("acme", "user-42")

model = GenericFakeChatModel(
    messages=iter(
        [
            AIMessage("Nice to meet you, Ada."),
            AIMessage("You told me your name is Ada."),
            AIMessage("Two plus two is four."),
        ]
    )
)


def build(mem: Memory) -> Any:
    def chat(state: MessagesState, runtime: Runtime[Any]) -> dict[str, Any]:
        # Long-term notes, shared across threads: LangGraph's ("memories", user) pattern.
        notes = ("memories", scope.user)
        said = state["messages"][-1].content
        if "my name is" in said.lower():
            runtime.store.put(notes, str(uuid.uuid4()), {"text": said})
        return {"messages": [model.invoke(state["messages"])]}

    graph = StateGraph(MessagesState)
    graph.add_node("chat", chat)
    graph.add_edge(START, "chat")
    return graph.compile(
        checkpointer=MemstrataSaver(mem, scope),
        store=MemstrataStore(mem, scope.tenant, index={"dims": 384, "fields": ["text"]}),
    )


config: Any = {"configurable": {"thread_id": "user-42-chat"}}

with Memory.open(URL) as mem:
    graph = build(mem)
    graph.invoke({"messages": [("user", "Hi, my name is Ada.")]}, config)
    first_turn = graph.get_state(config).config  # to fork from later
    graph.invoke({"messages": [("user", "What is my name?")]}, config)

# A new Memory (as a new process would open it): the graph resumes from its checkpoint.
with Memory.open(URL) as mem:
    graph = build(mem)
    state = graph.get_state(config)
    print("resumed:", [m.content for m in state.values["messages"]])

    # Resuming from the first turn's checkpoint forks the thread.
    graph.invoke({"messages": [("user", "What is two plus two?")]}, first_turn)

    # The thread is also a memstrata conversation; the fork is a branch of it.
    conversation = MemstrataSaver(mem, scope).conversation_id("user-42-chat")
    for leaf in mem.messages.leaves(scope, conversation).items:
        branch = mem.messages.path(scope, conversation, leaf.id)
        print("branch:", " | ".join(m.content for m in branch))

    # Long-term notes, found by meaning (the default embedder, offline).
    store = MemstrataStore(mem, scope.tenant, index={"dims": 384, "fields": ["text"]})
    hit = store.search(("memories", scope.user), query="what is the user called?")[0]
    print("note:", hit.value["text"])
