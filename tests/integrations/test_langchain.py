"""MemstrataChatMessageHistory against the real langchain-core: the history protocol,
RunnableWithMessageHistory, branches, pending replies, clear, async, and conversion."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Callable
from datetime import UTC, datetime
from typing import TYPE_CHECKING, Any

import pytest
from hypothesis import given
from hypothesis import strategies as st

from lazy_names import lazy
from memstrata import (
    AsyncMemory,
    Conflict,
    InvalidInput,
    Memory,
    MissingDependency,
    NewMessage,
    NotFound,
    Scope,
    new_id,
)
from memstrata.types import Message, Status, ToolCall

if TYPE_CHECKING:
    from langchain_core.messages import (
        AIMessage,
        BaseMessage,
        ChatMessage,
        FunctionMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
    )
    from langchain_core.prompt_values import PromptValue
    from langchain_core.prompts import ChatPromptTemplate, MessagesPlaceholder
    from langchain_core.runnables import RunnableLambda
    from langchain_core.runnables.history import RunnableWithMessageHistory

    from memstrata.integrations.langchain import (
        MemstrataChatMessageHistory,
        from_langchain,
        to_langchain,
    )
else:
    (
        AIMessage,
        BaseMessage,
        ChatMessage,
        FunctionMessage,
        HumanMessage,
        SystemMessage,
        ToolMessage,
    ) = lazy(
        "langchain_core.messages",
        "AIMessage",
        "BaseMessage",
        "ChatMessage",
        "FunctionMessage",
        "HumanMessage",
        "SystemMessage",
        "ToolMessage",
    )
    (PromptValue,) = lazy("langchain_core.prompt_values", "PromptValue")
    ChatPromptTemplate, MessagesPlaceholder = lazy(
        "langchain_core.prompts", "ChatPromptTemplate", "MessagesPlaceholder"
    )
    (RunnableLambda,) = lazy("langchain_core.runnables", "RunnableLambda")
    (RunnableWithMessageHistory,) = lazy(
        "langchain_core.runnables.history", "RunnableWithMessageHistory"
    )
    MemstrataChatMessageHistory, from_langchain, to_langchain = lazy(
        "memstrata.integrations.langchain",
        "MemstrataChatMessageHistory",
        "from_langchain",
        "to_langchain",
    )

SCOPE = Scope("acme", "u1")


def tool_exchange() -> list[BaseMessage]:
    return [
        SystemMessage(content="Be brief."),
        HumanMessage(content="Weather in Paris?"),
        AIMessage(
            content="",
            tool_calls=[{"name": "weather", "args": {"city": "Paris", "days": 2}, "id": "call_1"}],
        ),
        ToolMessage(content='{"temp": 21}', tool_call_id="call_1"),
        AIMessage(content="21 °C and sunny."),
    ]


def shape(messages: list[BaseMessage]) -> list[tuple[Any, ...]]:
    """What must survive a round trip (LangChain fills in ids and defaults of its own)."""
    out: list[tuple[Any, ...]] = []
    for m in messages:
        calls = [(c["name"], c["args"], c["id"]) for c in getattr(m, "tool_calls", [])]
        out.append((type(m).__name__, m.content, calls, getattr(m, "tool_call_id", None)))
    return out


# -- the protocol ----------------------------------------------------------------------------


def test_round_trip_keeps_roles_tool_calls_and_tool_results(mem: Memory) -> None:
    history = MemstrataChatMessageHistory(mem, SCOPE, title="weather")
    history.add_messages(tool_exchange())

    assert shape(history.messages) == shape(tool_exchange())
    stored = mem.messages.path(SCOPE, history.conversation_id)
    assert [m.role.value for m in stored] == ["system", "user", "assistant", "tool", "assistant"]
    assert stored[2].tool_calls[0].function.name == "weather"
    assert stored[3].tool_call_id == "call_1"
    # The LangChain ids are the memstrata ids, so a caller can go back to memstrata.
    assert [m.id for m in history.messages] == [m.id for m in stored]
    assert mem.conversations.get(SCOPE, history.conversation_id).title == "weather"


def test_convenience_methods_append_one_message_each(mem: Memory) -> None:
    history = MemstrataChatMessageHistory(mem, SCOPE)
    history.add_user_message("hi")
    history.add_ai_message("hello")
    assert shape(history.messages) == shape([HumanMessage("hi"), AIMessage("hello")])
    assert "hello" in str(history)


def test_a_name_is_kept_in_metadata_and_comes_back(mem: Memory) -> None:
    history = MemstrataChatMessageHistory(mem, SCOPE)
    history.add_messages([HumanMessage(content="I am Anna", name="anna")])
    (row,) = mem.messages.path(SCOPE, history.conversation_id)
    assert row.metadata == {"name": "anna"}
    assert history.messages[0].name == "anna"


def test_runnable_with_message_history_remembers_earlier_turns(mem: Memory) -> None:
    prompt = ChatPromptTemplate.from_messages(
        [MessagesPlaceholder("history"), ("human", "{question}")]
    )

    def model(value: PromptValue) -> AIMessage:
        seen = value.to_messages()
        return AIMessage(content=f"{len(seen)} messages, last: {seen[-1].content}")

    session = new_id()  # a session id that memstrata has not seen: created on first write
    from langchain_core._api.deprecation import LangChainDeprecationWarning

    with pytest.warns(LangChainDeprecationWarning):  # the wrapper is deprecated in 1.x
        chain = RunnableWithMessageHistory(
            prompt | RunnableLambda(model),
            lambda session_id: MemstrataChatMessageHistory(mem, SCOPE, session_id),
            input_messages_key="question",
            history_messages_key="history",
        )
    config: Any = {"configurable": {"session_id": session}}
    first = chain.invoke({"question": "one"}, config=config)
    second = chain.invoke({"question": "two"}, config=config)

    assert first.content == "1 messages, last: one"
    assert second.content == "3 messages, last: two"
    stored = mem.messages.path(SCOPE, session)
    assert [(m.role.value, m.content) for m in stored] == [
        ("user", "one"),
        ("assistant", "1 messages, last: one"),
        ("user", "two"),
        ("assistant", "3 messages, last: two"),
    ]


# -- branches and pending replies -------------------------------------------------------------


def test_following_history_shows_the_branch_chosen_through_memstrata(mem: Memory) -> None:
    history = MemstrataChatMessageHistory(mem, SCOPE)
    history.add_messages([HumanMessage("q"), AIMessage("first answer")])
    q, a1 = mem.messages.path(SCOPE, history.conversation_id)

    a2 = mem.messages.append(
        SCOPE, history.conversation_id, role="assistant", content="regenerated", parent_id=q.id
    )
    assert [m.content for m in history.messages] == ["q", "regenerated"]

    history.add_messages([HumanMessage("follow-up")])  # appends on the active branch
    assert [m.content for m in history.messages] == ["q", "regenerated", "follow-up"]
    assert mem.messages.path(SCOPE, history.conversation_id)[1].id == a2.id

    mem.conversations.set_active_leaf(SCOPE, history.conversation_id, a1.id)
    assert [m.content for m in history.messages] == ["q", "first answer"]


def test_a_pinned_history_keeps_to_its_branch_and_follows_its_own_appends(mem: Memory) -> None:
    follow = MemstrataChatMessageHistory(mem, SCOPE)
    follow.add_messages([HumanMessage("q"), AIMessage("a1")])
    q, a1 = mem.messages.path(SCOPE, follow.conversation_id)
    mem.messages.append(
        SCOPE, follow.conversation_id, role="assistant", content="a2", parent_id=q.id
    )

    pinned = MemstrataChatMessageHistory(mem, SCOPE, follow.conversation_id, leaf_id=a1.id)
    assert [m.content for m in pinned.messages] == ["q", "a1"]
    assert [m.content for m in follow.messages] == ["q", "a2"]

    pinned.add_messages([HumanMessage("more"), AIMessage("on a1")])
    assert [m.content for m in pinned.messages] == ["q", "a1", "more", "on a1"]
    assert pinned.leaf_id == mem.messages.path(SCOPE, follow.conversation_id)[-1].id
    # Appending moved memstrata's active leaf too (every append does).
    assert [m.content for m in follow.messages] == ["q", "a1", "more", "on a1"]


def test_pending_replies_are_left_out_and_block_appends(mem: Memory) -> None:
    history = MemstrataChatMessageHistory(mem, SCOPE)
    history.add_messages([HumanMessage("q")])
    pending = mem.messages.append(
        SCOPE, history.conversation_id, role="assistant", status="pending"
    )
    assert pending.status is Status.PENDING
    assert [m.content for m in history.messages] == ["q"]
    with pytest.raises(Conflict):
        history.add_messages([HumanMessage("too early")])

    mem.messages.complete(SCOPE, history.conversation_id, pending.id, content="done")
    assert [m.content for m in history.messages] == ["q", "done"]


# -- clear -------------------------------------------------------------------------------------


def test_clear_empties_the_conversation_for_every_reader_and_keeps_its_id(mem: Memory) -> None:
    history = MemstrataChatMessageHistory(mem, SCOPE, title="keep me")
    history.add_messages([HumanMessage("q"), AIMessage("a")])
    q = mem.messages.path(SCOPE, history.conversation_id)[0]
    mem.messages.append(
        SCOPE, history.conversation_id, role="assistant", content="b", parent_id=q.id
    )
    mem.conversations.update(SCOPE, history.conversation_id, metadata={"app": "x"})

    history.clear()

    assert history.messages == []
    other = MemstrataChatMessageHistory(mem, SCOPE, history.conversation_id)
    assert other.messages == []
    assert mem.history(SCOPE, history.conversation_id).messages == []
    assert mem.messages.leaves(SCOPE, history.conversation_id).items == []  # all branches
    conv = mem.conversations.get(SCOPE, history.conversation_id)
    assert (conv.title, conv.metadata, conv.message_count) == ("keep me", {"app": "x"}, 0)

    history.add_messages([HumanMessage("fresh start")])
    assert [m.content for m in other.messages] == ["fresh start"]


def test_clear_resets_a_pinned_history_and_tolerates_a_missing_conversation(
    mem: Memory,
) -> None:
    history = MemstrataChatMessageHistory(mem, SCOPE)
    history.add_messages([HumanMessage("q")])
    pinned = MemstrataChatMessageHistory(
        mem, SCOPE, history.conversation_id, leaf_id=history.messages[0].id
    )
    pinned.clear()
    assert pinned.leaf_id is None
    assert pinned.messages == []

    never = MemstrataChatMessageHistory(mem, SCOPE, new_id())
    never.clear()  # nothing to clear
    assert never.messages == []


def test_assigning_messages_replaces_the_history(mem: Memory) -> None:
    history = MemstrataChatMessageHistory(mem, SCOPE)
    history.add_messages([HumanMessage("old")])
    history.messages = [HumanMessage("new"), AIMessage("reply")]
    assert [m.content for m in history.messages] == ["new", "reply"]
    with pytest.raises(InvalidInput):
        history.messages = [FunctionMessage(content="x", name="f")]
    assert [m.content for m in history.messages] == ["new", "reply"]  # untouched


# -- scopes ------------------------------------------------------------------------------------


def test_another_scope_neither_reads_nor_writes_the_conversation(mem: Memory) -> None:
    mine = MemstrataChatMessageHistory(mem, SCOPE)
    mine.add_messages([HumanMessage("secret")])
    theirs = MemstrataChatMessageHistory(mem, Scope("acme", "u2"), mine.conversation_id)
    assert theirs.messages == []
    with pytest.raises(NotFound):
        theirs.add_messages([HumanMessage("intrusion")])
    assert [m.content for m in mine.messages] == ["secret"]


def test_any_string_names_a_conversation_of_its_scope(mem: Memory) -> None:
    history = MemstrataChatMessageHistory(mem, SCOPE, "not-a-uuid")
    assert history.messages == []
    history.add_messages([HumanMessage("q")])
    assert history.session_id == "not-a-uuid"
    again = MemstrataChatMessageHistory(mem, SCOPE, "not-a-uuid")
    assert again.conversation_id == history.conversation_id
    assert [m.content for m in again.messages] == ["q"]
    other_user = MemstrataChatMessageHistory(mem, Scope("acme", "u2"), "not-a-uuid")
    assert other_user.conversation_id != history.conversation_id
    assert other_user.messages == []


# -- async -------------------------------------------------------------------------------------


@pytest.mark.anyio
async def test_async_methods_on_the_async_facade(mem: Memory, amem: AsyncMemory) -> None:
    history = MemstrataChatMessageHistory(mem, SCOPE, new_id(), async_memory=amem)
    await history.aadd_messages(tool_exchange())  # creates the conversation first
    assert shape(await history.aget_messages()) == shape(tool_exchange())

    q = mem.messages.path(SCOPE, history.conversation_id)[1]
    pinned = MemstrataChatMessageHistory(
        mem, SCOPE, history.conversation_id, leaf_id=q.id, async_memory=amem
    )
    await pinned.aadd_messages([AIMessage("branch"), HumanMessage("next")])
    assert [m.content for m in await pinned.aget_messages()][-2:] == ["branch", "next"]
    assert pinned.leaf_id == (await amem.messages.path(SCOPE, history.conversation_id))[-1].id

    await history.aclear()
    assert await history.aget_messages() == []
    assert mem.conversations.get(SCOPE, history.conversation_id).message_count == 0


@pytest.mark.anyio
async def test_async_methods_fall_back_to_threads_without_an_async_memory(mem: Memory) -> None:
    history = MemstrataChatMessageHistory(mem, SCOPE)
    await history.aadd_messages([HumanMessage("q"), AIMessage("a")])
    assert [m.content for m in await history.aget_messages()] == ["q", "a"]
    await history.aclear()
    assert await history.aget_messages() == []


@pytest.mark.anyio
async def test_async_runnable_with_message_history(mem: Memory, amem: AsyncMemory) -> None:
    def model(value: PromptValue) -> AIMessage:
        return AIMessage(content=f"seen {len(value.to_messages())}")

    prompt = ChatPromptTemplate.from_messages([MessagesPlaceholder("history"), ("human", "{q}")])
    from langchain_core._api.deprecation import LangChainDeprecationWarning

    with pytest.warns(LangChainDeprecationWarning):
        chain = RunnableWithMessageHistory(
            prompt | RunnableLambda(model),
            lambda sid: MemstrataChatMessageHistory(mem, SCOPE, sid, async_memory=amem),
            input_messages_key="q",
            history_messages_key="history",
        )
    config: Any = {"configurable": {"session_id": new_id()}}
    await chain.ainvoke({"q": "one"}, config=config)
    second = await chain.ainvoke({"q": "two"}, config=config)
    assert second.content == "seen 3"


# -- conversion --------------------------------------------------------------------------------


def stored(fields: dict[str, Any]) -> Message:
    """A stored message as memstrata would return it for these append fields."""
    new = NewMessage.model_validate(fields)
    now = datetime.now(UTC)
    return Message(
        id=new_id(),
        conversation_id=new_id(),
        parent_id=None,
        role=new.role,
        content=new.content,
        files=(),
        tool_calls=tuple(new.tool_calls),
        tool_call_id=new.tool_call_id,
        status=new.status,
        metadata=new.metadata,
        occurred_at=now,
        created_at=now,
        seq=1,
        depth=0,
        token_count=1,
        branch_tokens=1,
    )


def test_content_blocks_keep_text_and_skip_reasoning_and_tool_blocks() -> None:
    message = AIMessage(
        content=[
            {"type": "reasoning", "reasoning": "hmm"},
            "Hello ",
            {"type": "text", "text": "world"},
            {"type": "tool_use", "id": "t1", "name": "f", "input": {}},
        ],
        tool_calls=[{"name": "f", "args": {}, "id": "t1"}],
    )
    fields = from_langchain(message)
    assert fields["content"] == "Hello world"
    assert fields["tool_calls"][0]["id"] == "t1"


@pytest.mark.parametrize(
    "make",
    [
        lambda: HumanMessage(
            content=[{"type": "image_url", "image_url": {"url": "https://x/y.png"}}]
        ),
        lambda: AIMessage(content="", tool_calls=[{"name": "f", "args": {}, "id": None}]),
        lambda: FunctionMessage(content="x", name="f"),
        lambda: ChatMessage(content="x", role="narrator"),
    ],
    ids=["image", "tool-call-without-id", "function-message", "unknown-role"],
)
def test_what_memstrata_cannot_keep_is_refused(make: Callable[[], BaseMessage]) -> None:
    with pytest.raises(InvalidInput):
        from_langchain(make())


def test_chat_message_roles_map_to_memstrata_roles() -> None:
    assert from_langchain(ChatMessage(content="x", role="human"))["role"].value == "user"
    assert from_langchain(ChatMessage(content="x", role="ai"))["role"].value == "assistant"


def test_arguments_that_are_not_a_json_object_come_back_as_invalid_tool_calls() -> None:
    call = ToolCall.model_validate(
        {"id": "c1", "function": {"name": "f", "arguments": "{not json"}}
    )
    message = stored({"role": "assistant", "content": "", "tool_calls": [call]})
    converted = to_langchain(message)
    assert isinstance(converted, AIMessage)
    assert converted.tool_calls == []
    (bad,) = converted.invalid_tool_calls
    assert (bad["name"], bad["args"], bad["id"]) == ("f", "{not json", "c1")
    # Written back, the raw text is kept as it was.
    again = from_langchain(converted)
    assert again["tool_calls"][0]["function"]["arguments"] == "{not json"


json_values = st.recursive(
    st.none() | st.booleans() | st.integers() | st.text(max_size=10),
    lambda inner: (
        st.lists(inner, max_size=3) | st.dictionaries(st.text(max_size=5), inner, max_size=3)
    ),
    max_leaves=8,
)
text = st.text(min_size=1, max_size=40).filter(lambda s: "\x00" not in s and s.strip() != "")
call_ids = st.text(alphabet="abcdef0123456789_", min_size=1, max_size=12)
lc_messages = st.one_of(
    text.map(lambda t: HumanMessage(content=t)),
    text.map(lambda t: SystemMessage(content=t)),
    st.builds(lambda t, i: ToolMessage(content=t, tool_call_id=i), text, call_ids),
    st.builds(
        lambda t, calls: AIMessage(content=t, tool_calls=calls),
        st.text(max_size=40),
        st.lists(
            st.builds(
                lambda n, a, i: {"name": n, "args": a, "id": i},
                st.text(alphabet="abcxyz_", min_size=1, max_size=8),
                st.dictionaries(st.text(max_size=5), json_values, max_size=3),
                call_ids,
            ),
            min_size=1,
            max_size=3,
        ),
    ),
)


@given(lc_messages)
def test_conversion_round_trips(message: BaseMessage) -> None:
    back = to_langchain(stored(from_langchain(message)))
    assert shape([back]) == shape([message])


def test_missing_langchain_names_the_extra(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setitem(sys.modules, "langchain_core.chat_history", None)
    monkeypatch.delitem(sys.modules, "memstrata.integrations.langchain")
    with pytest.raises(MissingDependency, match=r"memstrata\[langchain\]"):
        importlib.import_module("memstrata.integrations.langchain")
