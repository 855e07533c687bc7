"""The ``memstrata mcp`` command: one user's memory as an MCP server on stdin/stdout.

An MCP client (a desktop assistant, an IDE, an agent framework) starts it as a
subprocess and talks JSON-RPC over its stdin and stdout, so stdout carries nothing
else: logs go to stderr. The scope is fixed by the command line (default: the local
tenant and user); the tools never take one.

The MCP SDK is the optional ``mcp`` extra, imported only when the command runs.
"""

from __future__ import annotations

import contextlib

from memstrata.cli._common import Agent, Db, Tenant, User, errors, named_scope, settings_for
from memstrata.errors import MissingDependency
from memstrata.logs import configure_logging

__all__ = ["mcp"]


def mcp(
    tenant: Tenant = None,
    user: User = None,
    agent: Agent = None,
    db: Db = None,
) -> None:
    """Serve one user's memory over MCP on stdin/stdout (for MCP clients to start)."""
    with errors():
        settings = settings_for(db)
        scope = named_scope(settings, tenant, user, agent)
        try:
            from memstrata.mcpserver.server import run_stdio
        except ImportError as exc:
            raise MissingDependency(
                f"the MCP server needs its extra: pip install 'memstrata[mcp]' ({exc})"
            ) from None
        # stderr: stdout carries the protocol.
        configure_logging(json_logs=settings.log_format == "json", level=settings.log_level)
        with contextlib.suppress(KeyboardInterrupt):  # Ctrl-C in a terminal: a normal stop
            run_stdio(settings, scope)
