"""The OpenAI Agents SDK session on memstrata: the SDK's protocol, the same answers as the
SDK's own SQLiteSession for the same calls, exact item round trips, branches, scopes."""

from __future__ import annotations

import json
from pathlib import Path
from typing import TYPE_CHECKING, Any

import pytest

from integrations.adapters_support import run_example
from lazy_names import lazy
from memstrata import AsyncMemory, Memory, Scope
from memstrata.errors import InvalidInput

if TYPE_CHECKING:
    from agents.memory import Session, SessionSettings, SQLiteSession

    from memstrata.integrations.openai_agents import MemstrataSession
else:
    Session, SessionSettings, SQLiteSession = lazy(
        "agents.memory", "Session", "SessionSettings", "SQLiteSession"
    )
    (MemstrataSession,) = lazy("memstrata.integrations.openai_agents", "MemstrataSession")

pytestmark = pytest.mark.anyio

SCOPE = Scope(tenant="t1", user="u1")

ITEMS: list[Any] = [
    {"role": "system", "content": "Be brief."},
    {"role": "developer", "content": "Use metric units."},
    {"role": "user", "content": "Weather in Lisbon? ünïcödé ✓"},
    {
        "type": "message",
        "role": "user",
        "content": [
            {"type": "input_text", "text": "and this picture"},
            {"type": "input_image", "image_url": "data:image/png;base64,AAAA", "detail": "low"},
        ],
    },
    {
        "id": "rs_1",
        "type": "reasoning",
        "summary": [{"type": "summary_text", "text": "Need the weather tool."}],
        "encrypted_content": "gAAAAB" + "x" * 200,
    },
    {"id": "rs_2", "type": "reasoning", "summary": []},
    {
        "id": "fc_1",
        "type": "function_call",
        "call_id": "call_1",
        "name": "weather",
        "arguments": '{"city": "Lisbon"}',
        "status": "completed",
    },
    {"type": "function_call_output", "call_id": "call_1", "output": "sunny, 24 C"},
    {"type": "function_call_output", "call_id": "call_2", "output": ""},
    {
        "type": "function_call_output",
        "call_id": "call_3",
        "output": [{"type": "input_text", "text": "structured"}],
    },
    {
        "id": "msg_1",
        "type": "message",
        "role": "assistant",
        "status": "completed",
        "content": [{"type": "output_text", "text": "Sunny, 24 C.", "annotations": []}],
    },
    {"id": "ws_1", "type": "web_search_call", "status": "completed", "action": {"type": "search"}},
    {"role": "user", "content": "big " + "y" * 60_000},
]


@pytest.fixture
def anyio_backend() -> str:
    return "asyncio"


def test_it_is_an_sdk_session(mem: Memory) -> None:
    assert isinstance(MemstrataSession("s", mem, SCOPE), Session)


async def test_items_round_trip_exactly(amem: AsyncMemory) -> None:
    session = MemstrataSession("chat-1", amem, SCOPE)
    await session.add_items(ITEMS[:5])
    await session.add_items(ITEMS[5:])
    assert await session.get_items() == ITEMS
    assert await session.get_items(limit=2) == ITEMS[-2:]
    assert await session.get_items(limit=0) == []
    # A fresh object with the same id finds the same items (a restart).
    again = MemstrataSession("chat-1", amem, SCOPE)
    assert await again.get_items() == ITEMS


async def test_memstrata_reads_the_items_as_messages(amem: AsyncMemory) -> None:
    session = MemstrataSession("chat-2", amem, SCOPE)
    await session.add_items(ITEMS[2:11])
    msgs = await amem.messages.path(SCOPE, session.conversation_id)
    shape = [(m.role.value, m.content, m.tool_call_id) for m in msgs]
    assert shape[0] == ("user", "Weather in Lisbon? ünïcödé ✓", None)
    assert shape[1] == ("user", "and this picture", None)
    assert shape[2] == ("assistant", "Need the weather tool.", None)
    assert shape[3] == ("assistant", "[reasoning]", None)
    assert msgs[4].tool_calls[0].id == "call_1"
    assert msgs[4].tool_calls[0].function.arguments == '{"city": "Lisbon"}'
    assert shape[5] == ("tool", "sunny, 24 C", "call_1")
    assert shape[6] == ("tool", "[function_call_output]", "call_2")
    assert shape[8] == ("assistant", "Sunny, 24 C.", None)
    hits = await amem.recall.search(SCOPE, "Lisbon weather")
    assert any(h.conversation_id == session.conversation_id for h in hits)


SCRIPT: list[tuple[str, Any]] = [
    ("get", None),
    ("pop", None),
    ("add", ITEMS[2:4]),
    ("get", None),
    ("add", ITEMS[6:8]),
    ("get", 3),
    ("pop", None),
    ("get", None),
    ("add", [ITEMS[10]]),
    ("get", 1),
    ("pop", None),
    ("pop", None),
    ("pop", None),
    ("pop", None),
    ("pop", None),
    ("get", None),
    ("add", [ITEMS[0]]),
    ("clear", None),
    ("get", None),
    ("add", [ITEMS[11]]),
    ("get", -1),
]


async def _play(session: Any) -> list[Any]:
    out: list[Any] = []
    for op, arg in SCRIPT:
        if op == "get":
            out.append(await session.get_items(arg))
        elif op == "add":
            out.append(await session.add_items(arg))
        elif op == "pop":
            out.append(await session.pop_item())
        else:
            out.append(await session.clear_session())
    return out


async def test_same_answers_as_the_sdk_sqlite_session(amem: AsyncMemory) -> None:
    reference = SQLiteSession("ref")
    try:
        expected = await _play(reference)
    finally:
        reference.close()
    assert await _play(MemstrataSession("ref", amem, SCOPE)) == expected


async def test_pop_keeps_the_old_item_as_a_branch(amem: AsyncMemory) -> None:
    session = MemstrataSession("regen", amem, SCOPE)
    await session.add_items([ITEMS[2], {"role": "assistant", "content": "first try"}])
    popped = await session.pop_item()
    assert popped == {"role": "assistant", "content": "first try"}
    await session.add_items([{"role": "assistant", "content": "second try"}])
    items: list[Any] = await session.get_items()  # plain message dicts, each with a content
    assert [i["content"] for i in items] == [
        ITEMS[2]["content"],
        "second try",
    ]
    leaves = await amem.messages.leaves(SCOPE, session.conversation_id)
    assert sorted(m.content for m in leaves.items) == ["first try", "second try"]


async def test_session_ids_map_per_scope(amem: AsyncMemory) -> None:
    bob = Scope(tenant="t1", user="bob")
    other_tenant = Scope(tenant="t2", user="u1")
    a = MemstrataSession("user-42-chat", amem, SCOPE)
    await a.add_items([{"role": "user", "content": "alice canary"}])
    for scope in (bob, other_tenant):
        s = MemstrataSession("user-42-chat", amem, scope)
        assert s.conversation_id != a.conversation_id
        assert await s.get_items() == []
        assert await s.pop_item() is None
    assert MemstrataSession("user-42-chat", amem, SCOPE).conversation_id == a.conversation_id
    assert len(await a.get_items()) == 1


async def test_sync_memory_and_settings_limit(mem: Memory) -> None:
    session = MemstrataSession("sync", mem, SCOPE, session_settings=SessionSettings(limit=1))
    await session.add_items(ITEMS[2:4])
    assert await session.get_items() == [ITEMS[3]]
    assert await session.get_items(limit=5) == ITEMS[2:4]
    assert mem.history(SCOPE, session.conversation_id).messages[0].content == ITEMS[2]["content"]


async def test_bad_input_is_refused_whole(amem: AsyncMemory) -> None:
    with pytest.raises(InvalidInput):
        MemstrataSession("", amem, SCOPE)
    session = MemstrataSession("bad", amem, SCOPE)
    with pytest.raises(InvalidInput):
        await session.add_items([ITEMS[2], {"role": "user", "content": object()}])  # type: ignore[list-item, misc]  # deliberately not an item
    assert await session.get_items() == []


def test_metadata_item_is_plain_json() -> None:
    from memstrata.integrations.openai_agents import item_to_message

    row = item_to_message(ITEMS[4])
    assert json.loads(json.dumps(row["metadata"]))["openai_agents_item"] == ITEMS[4]
    big = item_to_message(ITEMS[-1])
    assert json.loads(big["content"]) == ITEMS[-1]


def test_example_runs(tmp_path: Path) -> None:
    out = run_example("openai_agents_session.py", tmp_path)
    assert "run 1: It is sunny, 24 C in Lisbon." in out
    assert "run 2: Earlier you asked: 'What is the weather in Lisbon?'" in out
    assert "memstrata: tool sunny, 24 C" in out
