"""The MCP provenance read tools: a reply's recorded context and a fact's usage."""

from __future__ import annotations

from collections.abc import AsyncIterator
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from lazy_names import lazy
from memstrata import AsyncMemory, Scope
from memstrata.config import Settings

if TYPE_CHECKING:
    from mcp import Client
    from mcp.types import CallToolResult

    from memstrata.mcpserver.server import build_server, fixed_scope
else:
    (Client,) = lazy("mcp", "Client")
    (CallToolResult,) = lazy("mcp.types", "CallToolResult")
    build_server, fixed_scope = lazy("memstrata.mcpserver.server", "build_server", "fixed_scope")

pytestmark = pytest.mark.anyio
ALICE = Scope("t1", "alice")


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


@pytest.fixture
async def local(tmp_path: Path) -> AsyncIterator[tuple[Client, AsyncMemory]]:
    mem = AsyncMemory.open(
        f"sqlite:///{(tmp_path / 'local.db').as_posix()}",
        settings=Settings(home=tmp_path, worker="off"),
    )
    try:
        async with Client(build_server(mem, fixed_scope(ALICE))) as client:
            yield client, mem
    finally:
        await mem.close()


def _data(result: CallToolResult) -> dict[str, Any]:
    assert not result.is_error, result.content
    assert isinstance(result.structured_content, dict)
    return result.structured_content


async def test_provenance_tools(local: tuple[Client, AsyncMemory]) -> None:
    client, mem = local
    cid = (await mem.conversations.create(ALICE)).id
    await mem.messages.append(ALICE, cid, role="user", content="Which tea?")
    fact = await mem.facts.add(ALICE, "Likes green tea", category="preference")
    got = _data(await client.call_tool("get_context", {"conversation_id": cid, "record": True}))
    reply_body = {
        "conversation_id": cid,
        "role": "assistant",
        "content": "Green.",
        "context_id": got["context_id"],
    }
    reply = await mem.messages.get(
        ALICE, cid, _data(await client.call_tool("add_message", reply_body))["id"]
    )
    assert "context_id" not in _data(
        await client.call_tool("get_context", {"conversation_id": cid})
    )
    found = _data(
        await client.call_tool(
            "get_reply_provenance", {"conversation_id": cid, "message_id": reply.id}
        )
    )
    assert found["record"]["id"] == got["context_id"]
    assert ("fact", fact.id) in {(i["kind"], i["id"]) for i in found["record"]["items"]}
    usage = _data(await client.call_tool("get_fact_usage", {"fact_id": fact.id}))
    assert [u["message_id"] for u in usage["items"]] == [reply.id]
    # Another user's fact id is unknown here.
    other = await mem.facts.add(Scope("t1", "bob"), "Likes coffee", category="preference")
    assert (await client.call_tool("get_fact_usage", {"fact_id": other.id})).is_error
