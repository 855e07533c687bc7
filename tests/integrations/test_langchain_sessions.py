"""LangChain persistence with any session id, both ways LangChain offers it:

- the deprecated ``RunnableWithMessageHistory`` over ``MemstrataChatMessageHistory``
  (a session id like ``"user-42-chat"`` stores and reads back its turns; a write that
  LangChain's callback swallowed is raised by the next turn);
- the path LangChain recommends instead, LangGraph persistence: ``create_agent`` with
  ``MemstrataSaver`` as its checkpointer, the thread's turns also readable as a
  memstrata conversation.
"""

from __future__ import annotations

from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from lazy_names import lazy
from memstrata import AsyncMemory, InvalidInput, Memory, Scope
from memstrata.config import Settings

if TYPE_CHECKING:
    from langchain.agents import create_agent
    from langchain_core.language_models.fake_chat_models import GenericFakeChatModel
    from langchain_core.messages import AIMessage, HumanMessage
    from langchain_core.prompt_values import PromptValue
    from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
    from langchain_core.runnables import RunnableLambda
    from langchain_core.runnables.history import RunnableWithMessageHistory

    from memstrata.integrations.langchain import MemstrataChatMessageHistory
    from memstrata.integrations.langgraph import MemstrataSaver
    from memstrata.integrations.threads import conversation_id_for
else:
    (create_agent,) = lazy("langchain.agents", "create_agent")
    (GenericFakeChatModel,) = lazy(
        "langchain_core.language_models.fake_chat_models", "GenericFakeChatModel"
    )
    AIMessage, HumanMessage = lazy("langchain_core.messages", "AIMessage", "HumanMessage")
    (PromptValue,) = lazy("langchain_core.prompt_values", "PromptValue")
    ChatPromptTemplate, MessagesPlaceholder = lazy(
        "langchain_core.prompts", "ChatPromptTemplate", "MessagesPlaceholder"
    )
    (RunnableLambda,) = lazy("langchain_core.runnables", "RunnableLambda")
    (RunnableWithMessageHistory,) = lazy(
        "langchain_core.runnables.history", "RunnableWithMessageHistory"
    )
    (MemstrataChatMessageHistory,) = lazy(
        "memstrata.integrations.langchain", "MemstrataChatMessageHistory"
    )
    (MemstrataSaver,) = lazy("memstrata.integrations.langgraph", "MemstrataSaver")
    (conversation_id_for,) = lazy("memstrata.integrations.threads", "conversation_id_for")

SCOPE = Scope("acme", "u42")
SESSION = "user-42-chat"


# A reply memstrata refuses to store (it keeps text, not images).
def unstorable() -> AIMessage:
    return AIMessage(content=[{"type": "image", "url": "https://example.invalid/a.png"}])


def _chain(mem: Memory, model: Any, amem: AsyncMemory | None = None) -> RunnableWithMessageHistory:
    prompt = ChatPromptTemplate.from_messages(
        [MessagesPlaceholder("history"), ("human", "{question}")]
    )
    from langchain_core._api.deprecation import LangChainDeprecationWarning

    with pytest.warns(LangChainDeprecationWarning):
        return RunnableWithMessageHistory(
            prompt | RunnableLambda(model),
            lambda session_id: MemstrataChatMessageHistory(
                mem, SCOPE, session_id, async_memory=amem
            ),
            input_messages_key="question",
            history_messages_key="history",
        )


def _counting_model(value: PromptValue) -> AIMessage:
    seen = value.to_messages()
    return AIMessage(content=f"{len(seen)} messages, last: {seen[-1].content}")


def test_a_non_uuid_session_id_stores_and_reads_back_its_turns(mem: Memory) -> None:
    chain = _chain(mem, _counting_model)
    config: Any = {"configurable": {"session_id": SESSION}}
    first = chain.invoke({"question": "one"}, config=config)
    second = chain.invoke({"question": "two"}, config=config)

    assert first.content == "1 messages, last: one"
    assert second.content == "3 messages, last: two"  # the first turn was read back
    stored = mem.messages.path(SCOPE, conversation_id_for(SCOPE, SESSION))
    assert [(m.role.value, m.content) for m in stored] == [
        ("user", "one"),
        ("assistant", "1 messages, last: one"),
        ("user", "two"),
        ("assistant", "3 messages, last: two"),
    ]
    history = MemstrataChatMessageHistory(mem, SCOPE, SESSION)
    assert [m.content for m in history.messages] == [m.content for m in stored]


def test_a_write_langchain_swallowed_fails_the_next_turn(mem: Memory) -> None:
    replies = iter([unstorable(), AIMessage(content="fine")])
    chain = _chain(mem, lambda value: next(replies))
    config: Any = {"configurable": {"session_id": SESSION}}
    chain.invoke({"question": "draw"}, config=config)  # LangChain logs the failed write
    with pytest.raises(InvalidInput) as failed:
        chain.invoke({"question": "again"}, config=config)
    assert any("earlier write" in note for note in failed.value.__notes__)
    # Raised once: the turn after that runs again.
    assert chain.invoke({"question": "again"}, config=config).content == "fine"


def test_create_agent_with_the_memstrata_checkpointer_keeps_the_thread(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'agent.db'}"
    settings = Settings(home=tmp_path, worker="off")
    config: Any = {"configurable": {"thread_id": SESSION}}
    with Memory.open(url, settings=settings) as mem:
        model = GenericFakeChatModel(messages=iter([AIMessage("Hello Ada."), AIMessage("Ada.")]))
        agent = create_agent(model, tools=[], checkpointer=MemstrataSaver(mem, SCOPE))
        agent.invoke({"messages": [HumanMessage("I am Ada.")]}, config)
        out = agent.invoke({"messages": [HumanMessage("Who am I?")]}, config)
        assert [m.content for m in out["messages"]] == [
            "I am Ada.",
            "Hello Ada.",
            "Who am I?",
            "Ada.",
        ]
    with Memory.open(url, settings=settings) as mem:  # reopened: the state is on disk
        agent = create_agent(
            GenericFakeChatModel(messages=iter([])),
            tools=[],
            checkpointer=MemstrataSaver(mem, SCOPE),
        )
        state = agent.get_state(config)
        assert [m.content for m in state.values["messages"]][-1] == "Ada."
        conversation = mem.messages.path(SCOPE, conversation_id_for(SCOPE, SESSION))
        assert [(m.role.value, m.content) for m in conversation] == [
            ("user", "I am Ada."),
            ("assistant", "Hello Ada."),
            ("user", "Who am I?"),
            ("assistant", "Ada."),
        ]


@pytest.mark.anyio
async def test_a_swallowed_async_write_fails_the_next_async_turn(
    mem: Memory, amem: AsyncMemory
) -> None:
    replies = iter([unstorable(), AIMessage(content="fine")])
    chain = _chain(mem, lambda value: next(replies), amem)
    config: Any = {"configurable": {"session_id": "async-chat"}}
    await chain.ainvoke({"question": "draw"}, config=config)
    with pytest.raises(InvalidInput):
        await chain.ainvoke({"question": "again"}, config=config)
    assert (await chain.ainvoke({"question": "again"}, config=config)).content == "fine"
