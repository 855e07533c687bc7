"""LangChain chat history on memstrata, both ways: an agent from ``create_agent`` with
memstrata as its checkpointer (LangChain's recommended persistence), and the older
``RunnableWithMessageHistory`` over ``MemstrataChatMessageHistory``. Any session id
works. Runs offline: the models are LangChain's fake chat models.

    python examples/langchain_history.py
"""

from __future__ import annotations

import warnings
from typing import Any

from langchain.agents import create_agent
from langchain_core.language_models.fake_chat_models import FakeListChatModel
from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
from langchain_core.runnables.history import RunnableWithMessageHistory

from memstrata import Memory, Scope
from memstrata.integrations.langchain import MemstrataChatMessageHistory
from memstrata.integrations.langgraph import MemstrataSaver

scope = Scope("acme", "user-42")

with Memory.open("sqlite:///langchain-demo.db") as mem:
    # 1. The recommended path: an agent whose thread is kept by memstrata.
    agent = create_agent(
        FakeListChatModel(responses=["Hello Ada!", "Your name is Ada."]),
        tools=[],
        checkpointer=MemstrataSaver(mem, scope),
    )
    config: Any = {"configurable": {"thread_id": "user-42-chat"}}
    agent.invoke({"messages": [("user", "Hi, I am Ada.")]}, config)
    reply = agent.invoke({"messages": [("user", "Who am I?")]}, config)
    print("agent:", reply["messages"][-1].content)

    # 2. The older wrapper (deprecated upstream), with a session id that is not a UUID.
    prompt = ChatPromptTemplate.from_messages(
        [MessagesPlaceholder("history"), ("human", "{question}")]
    )
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")  # LangChain's deprecation notice for the wrapper
        chain = RunnableWithMessageHistory(
            prompt | FakeListChatModel(responses=["Noted: you like tea.", "You like tea."]),
            lambda session_id: MemstrataChatMessageHistory(mem, scope, session_id),
            input_messages_key="question",
            history_messages_key="history",
        )
    session: Any = {"configurable": {"session_id": "support-ticket-7"}}
    chain.invoke({"question": "I like tea."}, config=session)
    chain.invoke({"question": "What do I like?"}, config=session)
    history = MemstrataChatMessageHistory(mem, scope, "support-ticket-7")
    print("history:", [m.content for m in history.messages])

    # Both are plain memstrata conversations: the same history any memstrata API reads.
    for conversation in mem.conversations.list(scope).items:
        turns = mem.messages.path(scope, conversation.id)
        print("conversation:", " | ".join(m.content for m in turns))
