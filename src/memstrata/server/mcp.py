"""The MCP endpoint of the REST app, when the optional ``mcp`` extra is installed."""

from __future__ import annotations

import logging
from typing import TYPE_CHECKING

from memstrata.mcpserver import INSTALL_HINT, sdk_missing

if TYPE_CHECKING:
    from fastapi import FastAPI

    from memstrata.api import AsyncMemory

__all__ = ["mount_mcp"]

log = logging.getLogger("memstrata.mcp")


def mount_mcp(app: FastAPI, memory: AsyncMemory, *, path: str = "/mcp") -> bool:
    """Serve MCP (streamable HTTP) at ``path`` of the REST app, behind its API keys.

    Returns False, and leaves the app as it is, when the ``mcp`` extra is not installed:
    the REST API never depends on it.
    """
    try:
        from memstrata.server.mcp_http import mount
    except ImportError as exc:
        if not sdk_missing(exc):
            raise
        log.info("MCP endpoint off: the mcp extra is not installed (%s)", INSTALL_HINT)
        return False
    mount(app, memory, path=path)
    return True
