"""Helpers for the conformance mixins; the public ones serve a backend's own tests too."""

from __future__ import annotations

import uuid
from collections.abc import Sequence
from typing import Any

from memstrata import Memory
from memstrata.api.core import Core
from memstrata.runtime import Limits, Runtime
from memstrata.storage.plan import Exec, Op, Query, Row
from memstrata.tokens import get_tokenizer
from memstrata.types import Message, Scope


def fresh_scope(agent: str | None = None, *, user: str | None = None) -> Scope:
    """A scope in a tenant no other test uses."""
    return Scope(f"t-{uuid.uuid4().hex[:16]}", user or f"u-{uuid.uuid4().hex[:8]}", agent)


def _rows_op(sql: str, params: Sequence[Any]) -> Op[list[Row]]:
    rows = yield Query(sql, params)
    return list(rows)


def _exec_op(sql: str, params: Sequence[Any]) -> Op[int]:
    n = yield Exec(sql, params)
    return int(n)


def sql_rows(memory: Memory, sql: str, params: Sequence[Any] = ()) -> list[Row]:
    """Rows of one query, run by the memory's own engine (``?`` placeholders)."""
    return memory.admin.read(_rows_op, sql, params)


def sql_exec(memory: Memory, sql: str, params: Sequence[Any] = ()) -> int:
    """Run one writing statement in its own transaction; returns the affected rows."""
    return memory.admin.write(_exec_op, sql, params)


def scope_state(memory: Memory, tenant: str) -> dict[str, list[Row]]:
    """Every stored row that belongs to ``tenant``, to prove a failed call wrote nothing."""
    t = (tenant,)
    return {
        "tenants": sql_rows(memory, "SELECT id FROM tenants WHERE id = ?", t),
        "users": sql_rows(memory, "SELECT id FROM users WHERE tenant_id = ? ORDER BY id", t),
        "conversations": sql_rows(
            memory,
            "SELECT id, title, metadata, active_leaf_id, message_count, updated_at "
            "FROM conversations WHERE tenant_id = ? ORDER BY id",
            t,
        ),
        "messages": sql_rows(
            memory,
            "SELECT m.id, m.parent_id, m.status, m.content, m.token_count, m.branch_tokens "
            "FROM messages m JOIN conversations c ON c.id = m.conversation_id "
            "WHERE c.tenant_id = ? ORDER BY m.id",
            t,
        ),
        "keys": sql_rows(
            memory, "SELECT id, revoked_at FROM api_keys WHERE tenant_id = ? ORDER BY id", t
        ),
    }


def memory_with_settings(memory: Memory, **changes: Any) -> Memory:
    """Another facade on the same engine, with ``changes`` applied to its settings.

    The runtime is rebuilt from the changed settings (tokenizer, limits) with a
    cascade of its own; the engine is shared, so close only ``memory``.
    """
    settings = memory.admin.settings.model_copy(update=changes)
    rt = Runtime(
        tokenizer=get_tokenizer(settings.token_encoding),
        limits=Limits(max_content_bytes=settings.max_content_bytes),
    )
    return Memory(Core(memory.core.engine, rt, settings))


def _is_uuid7(value: str) -> bool:
    u = uuid.UUID(value)
    return u.version == 7 and u.variant == uuid.RFC_4122 and str(u) == value


def _count_messages(memory: Memory, conversation_id: str) -> int:
    rows = sql_rows(
        memory, "SELECT count(*) FROM messages WHERE conversation_id = ?", (conversation_id,)
    )
    return int(rows[0][0])


def _cost(memory: Memory, *messages: Message) -> int:
    tok = memory.admin.runtime.tokenizer
    return sum(tok.count_message(m.content, m.tool_calls, m.files) for m in messages)


def _ids(messages: Sequence[Message]) -> list[str]:
    return [m.id for m in messages]


def _ids_of(items: Sequence[Any]) -> list[str]:
    return [item.id for item in items]


def _call(
    call_id: str, name: str = "lookup", arguments: str = '{"q": "weather"}'
) -> dict[str, Any]:
    return {"id": call_id, "type": "function", "function": {"name": name, "arguments": arguments}}
