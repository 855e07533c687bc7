"""Optional adapters that let other frameworks keep their memory in memstrata.

Each submodule needs its extra and says so on import when it is missing:

- :mod:`memstrata.integrations.langchain` (``pip install 'memstrata[langchain]'``):
  a LangChain chat message history over one memstrata conversation branch.
- :mod:`memstrata.integrations.langgraph` (``pip install 'memstrata[langgraph]'``):
  LangGraph checkpointers (sync and async) and a LangGraph store.
- :mod:`memstrata.integrations.threads`: the stable conversation id of a framework's
  session or thread id (no framework needed).
- Agent frameworks (``pip install 'memstrata[integrations]'``, or one extra each; see
  docs/integrations.md): :mod:`~memstrata.integrations.openai_agents` (a ``Session``),
  :mod:`~memstrata.integrations.pydantic_ai` (message history and a memory processor),
  :mod:`~memstrata.integrations.llamaindex` (memory blocks and a chat store),
  :mod:`~memstrata.integrations.autogen` (a ``Memory``),
  :mod:`~memstrata.integrations.google_adk` (a memory service) and
  :mod:`~memstrata.integrations.agent_framework` (history and context providers).

Nothing here is imported by ``memstrata`` itself, so the core never needs them.
"""
