"""memstrata over the Model Context Protocol: one set of tools, two transports.

- :mod:`memstrata.mcpserver.tools`: the tools (conversations, history, context, recall,
  facts, working memory) and how memstrata errors become tool errors.
- :mod:`memstrata.mcpserver.server`: the MCP server over an ``AsyncMemory`` and a scope
  provider, and the stdio runner behind ``memstrata mcp``.
- :mod:`memstrata.mcpserver.http`: streamable HTTP at ``/mcp`` of ``memstrata serve``,
  behind the REST API's keys.

No tool takes a tenant, user or agent: the scope is fixed by whoever runs the server
(the command line on stdio, the API key on HTTP), so a model can never name another
owner. The SDK is the optional ``mcp`` extra; importing this package does not need it.
"""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

if TYPE_CHECKING:
    from fastapi import FastAPI

    from memstrata.api import AsyncMemory

__all__ = ["INSTALL_HINT", "mount_mcp"]

INSTALL_HINT = "pip install 'memstrata[mcp]'"

log = logging.getLogger("memstrata.mcp")


def _sdk_missing(exc: ImportError) -> bool:
    root = (exc.name or "").split(".", 1)[0]
    return root in {"mcp", "mcp_types"}


def mount_mcp(app: FastAPI, memory: AsyncMemory, *, path: str = "/mcp") -> bool:
    """Serve MCP (streamable HTTP) at ``path`` of the REST app, behind its API keys.

    Returns False, and leaves the app as it is, when the ``mcp`` extra is not installed:
    the REST API never depends on it.
    """
    try:
        from memstrata.mcpserver.http import mount
    except ImportError as exc:
        if not _sdk_missing(exc):
            raise
        log.info("MCP endpoint off: the mcp extra is not installed (%s)", INSTALL_HINT)
        return False
    mount(app, memory, path=path)
    return True
