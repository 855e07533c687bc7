"""The ``memstrata mcp`` command: one user's memory as an MCP server on stdin/stdout.

An MCP client (a desktop assistant, an IDE, an agent framework) starts it as a
subprocess and talks JSON-RPC over its stdin and stdout, so stdout carries nothing
else: logs go to stderr. The scope is fixed by the command line (default: the local
tenant and user); the tools never take one.

The command registers itself on :data:`memstrata.cli.app` when this module is loaded
(``memstrata.cli`` loads it). The MCP SDK is the optional ``mcp`` extra, imported
only when the command runs.
"""

from __future__ import annotations

import contextlib
from typing import Annotated

import typer

from memstrata.cli import Db, _errors, _settings, app
from memstrata.errors import MissingDependency
from memstrata.logs import configure_logging
from memstrata.types import Scope

__all__ = ["mcp"]


def mcp(
    tenant: Annotated[
        str | None,
        typer.Option("--tenant", help="Tenant (default: the local tenant).", show_default=False),
    ] = None,
    user: Annotated[
        str | None,
        typer.Option("--user", help="User (default: the local user).", show_default=False),
    ] = None,
    agent: Annotated[
        str | None,
        typer.Option("--agent", help="The agent's own memory of the user.", show_default=False),
    ] = None,
    db: Db = None,
) -> None:
    """Serve one user's memory over MCP on stdin/stdout (for MCP clients to start)."""
    with _errors():
        settings = _settings(db)
        scope = Scope(tenant or settings.local_tenant, user or settings.local_user, agent)
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


# -- registration on the main command line ----------------------------------------------------

app.command("mcp")(mcp)
