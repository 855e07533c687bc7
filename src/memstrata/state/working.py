"""Working memory (sans-IO): one versioned document per user, and per conversation.

Written with compare-and-set: a caller that read version ``n`` writes with
``expected_version=n`` and loses with :class:`~memstrata.errors.PreconditionFailed`
if someone wrote in between, so two conversations updating one user's working
memory never corrupt it. ``expected_version=0`` means "only if absent"; ``None``
creates or overwrites. A conversation's document is reached only through a
conversation the caller's scope owns.
"""

from __future__ import annotations

import json
from typing import Any, Literal

from memstrata.conversation.conversations import get_conversation, hold_conversation
from memstrata.domain.state import WorkingMemory
from memstrata.errors import InvalidInput, NotFound, PreconditionFailed
from memstrata.runtime import Runtime
from memstrata.state.checks import Format, check_expected, dump, open_doc, seal_doc, sized
from memstrata.state.jsonschema import check_schema, validate
from memstrata.storage import tenancy
from memstrata.storage.plan import Exec, Op, Query, Row
from memstrata.storage.records import from_micros
from memstrata.types import Scope

__all__ = [
    "WorkingMemory",
    "delete_working_memory",
    "find_working_memory",
    "get_working_memory",
    "put_working_memory",
    "to_working_memory",
    "working_row",
]


WM_COLUMNS = "conversation_id, format, content, json_schema, template, version, updated_at"


def working_row(scope: Scope, conversation_id: str | None) -> str:
    """What a working-memory document's sealed text is bound to (its agent and
    conversation); ``memstrata encrypt`` binds the rows it seals the same way."""
    return f"{scope.agent_key}/{conversation_id or ''}"


def to_working_memory(row: Row, scope: Scope) -> WorkingMemory | None:
    """A ``working_memory`` row read as :data:`WM_COLUMNS` (None once its owner's data key
    was destroyed: the document reads as deleted)."""
    conversation_id, fmt_text, stored, json_schema, template, version, updated_at = row
    content = open_doc("working_memory.content", working_row(scope, conversation_id), stored)
    if content is None:
        return None
    fmt: Format = "json" if fmt_text == "json" else "markdown"
    return WorkingMemory(
        conversation_id=conversation_id or None,
        format=fmt,
        content=json.loads(content) if fmt == "json" else content,
        json_schema=None if json_schema is None else json.loads(json_schema),
        template=None if template is None else json.loads(template),
        version=version,
        updated_at=from_micros(updated_at),
    )


def _wm_key(scope: Scope, conversation_id: str | None) -> tuple[str, str, str, str]:
    return (scope.tenant, scope.user, scope.agent_key, conversation_id or "")


def find_working_memory(
    scope: Scope, conversation_id: str | None, *, lock: Literal["update"] | None = None
) -> Op[WorkingMemory | None]:
    """The user's document (``conversation_id`` None) or the conversation's, or None.

    No ownership check of the conversation: the caller has made it (as context assembly
    does, inside the same transaction).
    """
    rows = yield Query(
        f"SELECT {WM_COLUMNS} FROM working_memory WHERE tenant_id = ? AND user_id = ? "
        "AND agent_id = ? AND conversation_id = ?",
        _wm_key(scope, conversation_id),
        lock=lock,
    )
    return to_working_memory(rows[0], scope) if rows else None


def _drop_unreadable(scope: Scope, conversation_id: str | None) -> Op[bool]:
    """Delete the row in the way of a write when it reads as deleted (its owner's data key
    was destroyed, and a backup brought it back), so the next round creates afresh; True
    when it did."""
    rows = yield Query(
        "SELECT content FROM working_memory WHERE tenant_id = ? AND user_id = ? "
        "AND agent_id = ? AND conversation_id = ?",
        _wm_key(scope, conversation_id),
        lock="update",
    )
    row = working_row(scope, conversation_id)
    if rows and open_doc("working_memory.content", row, rows[0][0]) is None:
        yield Exec(
            "DELETE FROM working_memory WHERE tenant_id = ? AND user_id = ? AND agent_id = ? "
            "AND conversation_id = ?",
            _wm_key(scope, conversation_id),
        )
        return True
    return False


def get_working_memory(scope: Scope, conversation_id: str | None = None) -> Op[WorkingMemory]:
    if conversation_id is not None:
        yield from get_conversation(scope, conversation_id)
    doc = yield from find_working_memory(scope, conversation_id)
    if doc is None:
        raise NotFound("no working memory in this scope", kind="working_memory")
    return doc


def _check_template(fmt: Format, content: Any, template: Any) -> None:
    if fmt != "json" or template is None:
        return
    if not isinstance(template, dict):
        raise InvalidInput("a JSON template must be an object of field names", field="template")
    if not isinstance(content, dict):
        raise InvalidInput(
            "content must be a JSON object (the template has fields)", field="content"
        )
    extra = sorted(set(content) - set(template))
    if extra:
        raise InvalidInput(f"content has fields the template lacks: {extra}", field="content")


def put_working_memory(
    rt: Runtime,
    scope: Scope,
    content: Any,
    *,
    conversation_id: str | None = None,
    format: Format | None = None,
    json_schema: dict[str, Any] | None = None,
    template: Any = None,
    expected_version: int | None = None,
) -> Op[WorkingMemory]:
    """Write the document; a schema or template given once is kept for later writes.

    Without ``expected_version`` the write creates or overwrites, so it never answers
    PreconditionFailed: it reads the row locked, and a concurrent creation it loses
    to (its insert does nothing) sends it round once more to overwrite that row.
    """
    check_expected(expected_version)
    now = rt.clock()
    yield from tenancy.ensure_user(scope.tenant, scope.user, now)  # user before conversation
    if conversation_id is not None:
        yield from hold_conversation(scope, conversation_id)
    key = _wm_key(scope, conversation_id)
    for _ in range(3):
        old = yield from find_working_memory(scope, conversation_id, lock="update")
        fmt, text, schema_text, tmpl_text = _wm_document(
            content, old, format=format, json_schema=json_schema, template=template
        )
        stored = seal_doc(
            "working_memory.content", working_row(scope, conversation_id), scope, text
        )
        if old is None:
            if expected_version not in (None, 0):
                raise PreconditionFailed(
                    "working memory changed (it does not exist)", current_version=0
                )
            n = yield Exec(
                "INSERT INTO working_memory (tenant_id, user_id, agent_id, conversation_id, format, "
                "content, json_schema, template, version, updated_at) "
                "VALUES (?, ?, ?, ?, ?, ?, ?, ?, 1, ?) ON CONFLICT DO NOTHING",
                (*key, fmt, stored, schema_text, tmpl_text, now),
            )
            if not n:
                dropped = yield from _drop_unreadable(scope, conversation_id)
                if not dropped and expected_version == 0:
                    raise PreconditionFailed("working memory was created concurrently")
        else:
            if expected_version is not None and expected_version != old.version:
                raise PreconditionFailed(
                    f"working memory is at version {old.version}, not {expected_version}",
                    current_version=old.version,
                )
            # The version in the WHERE clause makes the write atomic across processes.
            n = yield Exec(
                "UPDATE working_memory SET format = ?, content = ?, json_schema = ?, "
                "template = ?, version = ?, updated_at = ? WHERE tenant_id = ? AND user_id = ? "
                "AND agent_id = ? AND conversation_id = ? AND version = ?",
                (fmt, stored, schema_text, tmpl_text, old.version + 1, now, *key, old.version),
            )
            if not n and expected_version is not None:
                raise PreconditionFailed("working memory changed concurrently")
        if n:
            written = yield from find_working_memory(scope, conversation_id)
            assert written is not None
            return written
    raise PreconditionFailed("working memory keeps changing concurrently; retry")


def _wm_document(
    content: Any,
    old: WorkingMemory | None,
    *,
    format: Format | None,
    json_schema: dict[str, Any] | None,
    template: Any,
) -> tuple[Format, str, str | None, str | None]:
    """The checked document to store: format, text, schema text and template text.

    Without ``format`` the content says which (a string: markdown, any other JSON value:
    json), never the stored document: markdown sent after a JSON document must not be
    kept as a JSON string (a prompt would show its escapes)."""
    fmt: Format = format or ("markdown" if isinstance(content, str) else "json")
    if fmt not in ("markdown", "json"):
        raise InvalidInput("format must be markdown or json", field="format")
    same = old is not None and old.format == fmt
    schema = json_schema if json_schema is not None else (old.json_schema if old else None)
    tmpl = template if template is not None else (old.template if old and same else None)
    if schema is not None:
        if fmt != "json" and json_schema is None:
            raise InvalidInput(
                "this working memory has a json_schema: send a JSON value, or delete the "
                "document before writing markdown",
                field="content",
            )
        if fmt != "json":
            raise InvalidInput("a json_schema needs format json", field="json_schema")
        check_schema(schema)
        validate(content, schema)
    if fmt == "markdown" and not isinstance(content, str):
        raise InvalidInput("markdown working memory must be a string", field="content")
    _check_template(fmt, content, tmpl)
    stored = sized(content if fmt == "markdown" else dump(content), "content")
    schema_text = None if schema is None else sized(dump(schema), "json_schema")
    tmpl_text = None if tmpl is None else sized(dump(tmpl), "template")
    return fmt, stored, schema_text, tmpl_text


def delete_working_memory(scope: Scope, conversation_id: str | None = None) -> Op[None]:
    if conversation_id is not None:
        yield from get_conversation(scope, conversation_id)
    n = yield Exec(
        "DELETE FROM working_memory WHERE tenant_id = ? AND user_id = ? AND agent_id = ? "
        "AND conversation_id = ?",
        _wm_key(scope, conversation_id),
    )
    if not n:
        raise NotFound("no working memory in this scope", kind="working_memory")
