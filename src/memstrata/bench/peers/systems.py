"""The chat memories compared by ``memstrata bench peers``, each used the way its own
documentation shows, on a SQLite file in a fresh directory, with one shared token counter.

- memstrata: ``mem.messages.append`` per message, ``mem.history(max_tokens=...)``.
- LangChain: ``SQLChatMessageHistory.add_message`` per message; history is
  ``.messages`` passed through ``trim_messages(strategy="last", start_on="human")``.
- LlamaIndex: ``Memory.from_defaults`` on its SQLAlchemy chat store (aiosqlite),
  ``put`` per message; ``get()`` returns the active queue, which ``Memory`` keeps
  under ``token_limit * chat_history_token_ratio`` by archiving older messages.
- LangGraph: a one-node ``StateGraph`` whose state is ``messages`` with the
  ``add_messages`` reducer, checkpointed by ``SqliteSaver``; one ``invoke`` per turn
  (the node answers), history is ``get_state`` through ``trim_messages``.

Peer libraries are imported only here, inside the worker process that measures them.
"""

from __future__ import annotations

import math
import sqlite3
from collections.abc import Callable
from pathlib import Path
from typing import Any

from memstrata.tokens import get_tokenizer

__all__ = ["PEER_EXTRA", "SYSTEMS", "counters", "open_system"]

PEER_EXTRA = "pip install 'memstrata[peers]'"
FLUSH_TOKENS = 100


def counters() -> tuple[Callable[[str], int], Callable[[str], int]]:
    """(text tokens, message tokens): o200k_base, plus 4 per message (DESIGN.md "Tokens")."""
    tok = get_tokenizer("o200k_base")
    return tok.count_text, tok.count_message


def _dir_bytes(path: Path) -> int:
    return sum(p.stat().st_size for p in path.iterdir() if p.is_file())


class MemstrataChat:
    def __init__(self, home: Path, max_tokens: int) -> None:
        from memstrata.api import Memory
        from memstrata.config import Settings
        from memstrata.types import Scope

        self._home = home
        # Recall indexing off: no peer indexes for search on append (measured in bench history).
        settings = Settings(home=home, worker="off", recall_index=False)
        self._mem = Memory.open(
            f"sqlite:///{(home / 'memstrata.db').as_posix()}", settings=settings
        )
        self._scope = Scope("bench", "peers")
        self._cid = self._mem.conversations.create(self._scope, title="peers").id

    def append_turn(self, user: str, assistant: str) -> None:
        append = self._mem.messages.append
        append(self._scope, self._cid, role="user", content=user)
        append(self._scope, self._cid, role="assistant", content=assistant)

    def history(self, max_tokens: int) -> list[str]:
        h = self._mem.history(self._scope, self._cid, max_tokens=max_tokens)
        return [m.content for m in h.messages]

    def store_bytes(self) -> int:
        return _dir_bytes(self._home)

    def close(self) -> None:
        self._mem.close()


def _trim(messages: list[Any], max_tokens: int, count_message: Callable[[str], int]) -> list[str]:
    from langchain_core.messages import BaseMessage, trim_messages

    # The per-message signature (annotated BaseMessage) is the form trim_messages sums
    # itself, the cheapest counter it accepts.
    def counter(msg: BaseMessage) -> int:
        return count_message(str(msg.content))

    # trim_messages checks the annotation object itself; postponed annotations are strings.
    counter.__annotations__["msg"] = BaseMessage

    kept = trim_messages(
        messages, max_tokens=max_tokens, token_counter=counter, strategy="last", start_on="human"
    )
    return [str(m.content) for m in kept]


class LangChainChat:
    def __init__(self, home: Path, max_tokens: int) -> None:
        from langchain_community.chat_message_histories import SQLChatMessageHistory

        self._home = home
        self._count_message = counters()[1]
        self._history = SQLChatMessageHistory(
            session_id="peers", connection=f"sqlite:///{(home / 'langchain.db').as_posix()}"
        )

    def append_turn(self, user: str, assistant: str) -> None:
        from langchain_core.messages import AIMessage, HumanMessage

        self._history.add_message(HumanMessage(user))
        self._history.add_message(AIMessage(assistant))

    def history(self, max_tokens: int) -> list[str]:
        return _trim(self._history.messages, max_tokens, self._count_message)

    def store_bytes(self) -> int:
        return _dir_bytes(self._home)

    def close(self) -> None:
        self._history.engine.dispose()


class LlamaIndexChat:
    def __init__(self, home: Path, max_tokens: int) -> None:
        from llama_index.core.memory import Memory

        self._home = home
        count_text = counters()[0]
        ratio = 0.7  # Memory's default chat_history_token_ratio
        self._memory = Memory.from_defaults(
            session_id="peers",
            # The active queue Memory keeps is token_limit * ratio: the same budget as the others.
            token_limit=math.ceil(max_tokens / ratio),
            chat_history_token_ratio=ratio,
            # Memory takes len() of what this returns.
            tokenizer_fn=lambda text: [0] * count_text(text),
            # Archive about a message at a time (the default flushes 70% of the budget at
            # once, leaving far fewer tokens than asked for in the history).
            token_flush_size=FLUSH_TOKENS,
            async_database_uri=f"sqlite+aiosqlite:///{(home / 'llamaindex.db').as_posix()}",
        )

    def append_turn(self, user: str, assistant: str) -> None:
        from llama_index.core.llms import ChatMessage, MessageRole

        self._memory.put(ChatMessage(role=MessageRole.USER, content=user))
        self._memory.put(ChatMessage(role=MessageRole.ASSISTANT, content=assistant))

    def history(self, max_tokens: int) -> list[str]:
        return [str(m.content) for m in self._memory.get()]

    def store_bytes(self) -> int:
        return _dir_bytes(self._home)

    def close(self) -> None:
        pass


class LangGraphChat:
    def __init__(self, home: Path, max_tokens: int) -> None:
        from typing import Annotated, TypedDict

        from langchain_core.messages import AIMessage, AnyMessage
        from langgraph.checkpoint.sqlite import SqliteSaver
        from langgraph.graph import START, StateGraph
        from langgraph.graph.message import add_messages

        # The functional form: its types are objects, which LangGraph reads for the reducer.
        State = TypedDict("State", {"messages": Annotated[list[AnyMessage], add_messages]})  # noqa: UP013

        self._home = home
        self._count_message = counters()[1]
        self._answer = ""

        def respond(state: Any) -> dict[str, Any]:
            return {"messages": [AIMessage(self._answer)]}

        graph = StateGraph(State)
        graph.add_node("respond", respond)
        graph.add_edge(START, "respond")
        self._conn = sqlite3.connect(home / "langgraph.db", check_same_thread=False)
        self._graph = graph.compile(checkpointer=SqliteSaver(self._conn))
        self._config: Any = {"configurable": {"thread_id": "peers"}}

    def append_turn(self, user: str, assistant: str) -> None:
        from langchain_core.messages import HumanMessage

        self._answer = assistant  # what the node "generates" for this turn
        self._graph.invoke({"messages": [HumanMessage(user)]}, self._config)

    def history(self, max_tokens: int) -> list[str]:
        messages = self._graph.get_state(self._config).values["messages"]
        return _trim(messages, max_tokens, self._count_message)

    def store_bytes(self) -> int:
        return _dir_bytes(self._home)

    def close(self) -> None:
        self._conn.close()


SYSTEMS: dict[str, Callable[[Path, int], Any]] = {
    "memstrata": MemstrataChat,
    "langchain": LangChainChat,
    "llamaindex": LlamaIndexChat,
    "langgraph": LangGraphChat,
}


def open_system(name: str, home: Path, max_tokens: int) -> Any:
    return SYSTEMS[name](home, max_tokens)
