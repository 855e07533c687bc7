"""memstrata over the Model Context Protocol: one set of tools, two transports.

- :mod:`memstrata.mcpserver.tools`: the tools (conversations, history, context, recall,
  facts, working memory) and how memstrata errors become tool errors.
- :mod:`memstrata.mcpserver.server`: the MCP server over an ``AsyncMemory`` and a scope
  provider, and the stdio runner behind ``memstrata mcp``.

Streamable HTTP at ``/mcp`` of ``memstrata serve``, behind the REST API's keys, belongs to
the REST server (:mod:`memstrata.server.mcp_http`): the server uses this package, never the
reverse.

No tool takes a tenant, user or agent: the scope is fixed by whoever runs the server
(the command line on stdio, the API key on HTTP), so a model can never name another
owner. The SDK is the optional ``mcp`` extra; importing this package does not need it.
"""

from __future__ import annotations

__all__ = ["INSTALL_HINT", "sdk_missing"]

INSTALL_HINT = "pip install 'memstrata[mcp]'"

# Top-level modules of the optional ``mcp`` extra: an ImportError naming one of them means
# the extra is absent, any other one is a real bug.
_SDK_MODULES = frozenset({"mcp", "mcp_types"})


def sdk_missing(exc: ImportError) -> bool:
    """Whether ``exc`` says the ``mcp`` extra is not installed."""
    return (exc.name or "").split(".", 1)[0] in _SDK_MODULES
