"""What the agent-framework adapters share: the async facade behind a sync or async
memory, and a stable conversation for a framework's own session id.

Frameworks name their sessions with free strings ("user-42-chat"); memstrata
conversations have UUIDs. :func:`session_conversation_id` maps one to the other with
a name-based UUID over the framework, the whole scope and the session id, so the same
session id of two users (or tenants, or agents) never meets the same conversation, and
a process that restarts finds its session again without a lookup table.
"""

from __future__ import annotations

import contextlib
import json
import re
import uuid
from collections.abc import Sequence
from typing import TYPE_CHECKING, Any

from memstrata.api import AsyncMemory, Memory
from memstrata.errors import Conflict, InvalidInput, NotFound
from memstrata.longterm.inject import fact_line
from memstrata.longterm.model import Fact
from memstrata.types import Conversation, Message, Scope

if TYPE_CHECKING:
    from memstrata.context import Context

__all__ = [
    "MemoryLike",
    "all_facts",
    "append_rows",
    "as_async",
    "attach_native",
    "ensure_conversation",
    "facts_block",
    "json_safe",
    "memory_blocks",
    "native_of",
    "rank_facts",
    "session_conversation_id",
    "user_memory_blocks",
]

#: What an adapter accepts: the sync facade (wrapped) or the async one.
MemoryLike = Memory | AsyncMemory

# A fixed namespace so the mapping survives upgrades and process restarts.
_NAMESPACE = uuid.UUID("6d2f1c52-3b0a-4c41-9d57-5b1f0c7e8a21")


def as_async(memory: MemoryLike) -> AsyncMemory:
    """The async facade over ``memory``'s store (the same store, no copy)."""
    if isinstance(memory, AsyncMemory):
        return memory
    if isinstance(memory, Memory):
        return AsyncMemory(memory.core)
    raise InvalidInput(
        f"expected a memstrata Memory or AsyncMemory, got {type(memory).__name__}",
        field="memory",
    )


def session_conversation_id(framework: str, scope: Scope, session_id: str) -> str:
    """The conversation id that ``session_id`` of ``framework`` maps to in ``scope``."""
    if not isinstance(session_id, str) or not session_id:
        raise InvalidInput("the session id must be a non-empty string", field="session_id")
    name = json.dumps([framework, scope.tenant, scope.user, scope.agent, session_id])
    return str(uuid.uuid5(_NAMESPACE, name))


async def ensure_conversation(
    memory: AsyncMemory, scope: Scope, conversation_id: str, *, title: str | None = None
) -> Conversation:
    """The conversation, created on first use (two racing creators both get it)."""
    try:
        return await memory.conversations.get(scope, conversation_id)
    except NotFound:
        pass
    try:
        return await memory.conversations.create(scope, id=conversation_id, title=title)
    except Conflict:
        return await memory.conversations.get(scope, conversation_id)


def json_safe(value: Any) -> Any:
    """``value`` as plain JSON data (what message metadata can hold), or InvalidInput."""
    try:
        return json.loads(json.dumps(value))
    except (TypeError, ValueError) as exc:
        raise InvalidInput(f"the item is not JSON data: {exc}", field="items") from None


# A framework's own object rides in the metadata of the message that shows it, so it comes
# back exactly; one too big for metadata (64 kB) becomes that message's content instead.
_INLINE_LIMIT = 48_000
_IN_CONTENT = "in_content"


def attach_native(key: str, native: Any, row: dict[str, Any]) -> dict[str, Any]:
    """``row`` (message fields) carrying ``native`` (JSON data) under ``key``."""
    encoded = json.dumps(native, ensure_ascii=False)
    if len(encoded.encode()) > _INLINE_LIMIT:
        return {**row, "content": encoded, "metadata": {key: _IN_CONTENT}}
    return {**row, "metadata": {key: native}}


def native_of(key: str, message: Message) -> Any:
    """What :func:`attach_native` put in ``message`` under ``key`` (None: nothing)."""
    value = message.metadata.get(key)
    if value == _IN_CONTENT:
        return json.loads(message.content)
    return value


def memory_blocks(ctx: Context) -> list[str]:
    """The memory memstrata adds to a context (profile, facts, working memory, plan,
    summary, recalled messages), one tagged block each, without the conversation's own
    system and recent messages, which a framework already sends itself."""
    end = len(ctx.messages) - len(ctx.window)
    return [str(m["content"]) for m in ctx.messages[len(ctx.system) : end]]


def facts_block(facts: Sequence[Fact]) -> str:
    """A user's facts as one tagged block, the way a context shows them."""
    lines = (fact_line(f.content, f.category, f.confidence, f.source_error) for f in facts)
    return "<memory>\n" + "".join(line + "\n" for line in lines) + "</memory>"


_WORD = re.compile(r"\w+")


def _words(text: str) -> set[str]:
    return {w for w in _WORD.findall(text.lower()) if len(w) > 2}


def rank_facts(facts: list[Fact], query: str) -> list[tuple[Fact, float]]:
    """Facts sharing words with ``query``, best first, scored by the share of the query's
    words they hold (an empty query keeps every fact, scored 1)."""
    wanted = _words(query)
    if not wanted:
        return [(f, 1.0) for f in facts]
    scored = [(f, len(wanted & _words(f.content)) / len(wanted)) for f in facts]
    return sorted((p for p in scored if p[1] > 0), key=lambda p: -p[1])


async def all_facts(memory: AsyncMemory, scope: Scope) -> list[Fact]:
    """Every active fact of ``scope``, newest first (all pages)."""
    facts: list[Fact] = []
    cursor: str | None = None
    while True:
        page = await memory.facts.list(scope, limit=200, cursor=cursor)
        facts.extend(page.items)
        cursor = page.next_cursor
        if cursor is None:
            return facts


async def append_rows(
    memory: AsyncMemory,
    scope: Scope,
    conversation_id: str,
    rows: Sequence[dict[str, Any]],
    *,
    title: str | None = None,
) -> None:
    """Append message ``rows`` in order, creating the conversation on first use."""
    if not rows:
        return
    await ensure_conversation(memory, scope, conversation_id, title=title)
    for row in rows:
        await memory.messages.append(scope, conversation_id, **row)


async def user_memory_blocks(
    memory: AsyncMemory,
    scope: Scope,
    conversation_id: str | None,
    query: str | None,
    *,
    budget: int,
    k: int,
) -> list[str]:
    """The memory to put before a model call: the memory blocks of the conversation's
    context when there is one and it has any, else the user's facts and the past
    messages recall finds for ``query``."""
    if conversation_id is not None:
        with contextlib.suppress(NotFound):
            ctx = await memory.context(scope, conversation_id, budget=budget, query=query)
            found = memory_blocks(ctx)
            if found:
                return found
    facts = await all_facts(memory, scope)
    blocks = [facts_block(facts)] if facts else []
    if query:
        hits = await memory.recall.search(scope, query, k=k)
        if hits:
            lines = "".join(f"- {h.message.role.value}: {h.message.content}\n" for h in hits)
            blocks.append(f"<recalled-messages>\n{lines}</recalled-messages>")
    return blocks
