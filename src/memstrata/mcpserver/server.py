"""The MCP server over one ``AsyncMemory``, and the stdio runner of ``memstrata mcp``.

The server is the SDK's ``MCPServer`` with memstrata's tools; who the tools act as is
the scope provider's business, so the same server serves a fixed local user on stdio
and each API key's user on HTTP.
"""

from __future__ import annotations

import logging

import anyio
from mcp.server.mcpserver import Context, MCPServer

from memstrata.api import AsyncMemory
from memstrata.config import Settings
from memstrata.mcpserver.tools import MemoryTools, ScopeProvider
from memstrata.types import Scope

__all__ = ["INSTRUCTIONS", "build_server", "fixed_scope", "run_stdio", "serve_stdio"]

INSTRUCTIONS = (
    "Long-term memory for one user. Conversations are message trees: create_conversation, "
    "then add_message for each turn; get_context returns the messages for your next model "
    "call under a token budget (recent turns, summary, remembered facts, working memory and "
    "recalled past messages). search_memory finds past messages in any conversation. "
    "list_facts, add_fact and forget_fact manage what is remembered about the user; "
    "get_working_memory and update_working_memory hold scratch notes (the user's, or one "
    "conversation's)."
)


def fixed_scope(scope: Scope) -> ScopeProvider:
    """A provider that always answers ``scope`` (stdio: whoever started the server)."""

    def provide(_: Context) -> Scope:
        return scope

    return provide


def build_server(memory: AsyncMemory, scope_of: ScopeProvider) -> MCPServer:
    """An MCP server whose tools act on ``memory`` as ``scope_of`` says."""
    from memstrata import __version__

    # The SDK's constructor calls logging.basicConfig; the host's logging set-up
    # (memstrata's JSON logs, or an embedding app's) stays as it was.
    root = logging.getLogger()
    handlers, level = root.handlers[:], root.level
    try:
        server: MCPServer = MCPServer(
            "memstrata", version=__version__, instructions=INSTRUCTIONS, log_level="WARNING"
        )
    finally:
        root.handlers[:] = handlers
        root.setLevel(level)
    MemoryTools(memory, scope_of).register(server)
    return server


async def serve_stdio(settings: Settings, scope: Scope) -> None:
    """Serve ``scope``'s memory on stdin/stdout until the client hangs up."""
    memory = AsyncMemory.open(settings.database_url(), settings=settings)
    memory.jobs.start_local_worker()
    try:
        await build_server(memory, fixed_scope(scope)).run_stdio_async()
    finally:
        await memory.close()


def run_stdio(settings: Settings, scope: Scope) -> None:
    """Blocking entry point of ``memstrata mcp``."""
    anyio.run(serve_stdio, settings, scope)
