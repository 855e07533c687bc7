"""Optional adapters that let other frameworks keep their memory in memstrata.

Each submodule needs its extra and says so on import when it is missing:

- :mod:`memstrata.integrations.langchain` (``pip install 'memstrata[langchain]'``):
  a LangChain chat message history over one memstrata conversation branch.
- :mod:`memstrata.integrations.langgraph` (``pip install 'memstrata[langgraph]'``):
  LangGraph checkpointers (sync and async) and a LangGraph store.
- :mod:`memstrata.integrations.threads`: the stable conversation id of a framework's
  session or thread id (no framework needed).

Nothing here is imported by ``memstrata`` itself, so the core never needs them.
"""
