"""The MCP tools: what a model may do with one user's memory.

Each tool is a coroutine whose type hints become its input schema and whose docstring
becomes its description, so both are written for a model to read. Every tool acts in
the scope its server was given (:data:`ScopeProvider`); none takes a tenant, user or
agent. Results are JSON objects, trimmed to what a model needs.

A memstrata error becomes a tool error carrying its message (the model can read it
and correct itself); a server-side failure (5xx) is logged in full and reported
without internals, as the REST API does.
"""

from __future__ import annotations

import functools
import inspect
import json
import logging
from collections.abc import Awaitable, Callable, Iterator
from contextlib import contextmanager
from typing import Annotated, Any, Literal, ParamSpec

from mcp.server.mcpserver import Context, MCPServer
from mcp.server.mcpserver.exceptions import ToolError
from mcp.types import ToolAnnotations
from pydantic import Field

from memstrata import strictjson
from memstrata.api import AsyncMemory
from memstrata.context import Context as MemoryContext
from memstrata.disclosure import client_message
from memstrata.domain.recall import MAX_EXPLAIN_IDS
from memstrata.errors import InvalidInput, MemstrataError, NotFound, PreconditionFailed
from memstrata.longterm.model import Fact
from memstrata.recall.service import MAX_K, RecallHit
from memstrata.state import WorkingMemory
from memstrata.types import Scope

__all__ = ["Category", "FactStatusName", "MemoryTools", "ScopeProvider", "tool_errors"]

log = logging.getLogger("memstrata.mcp")

ScopeProvider = Callable[[Context], Scope]
"""Who the tools act as, given the request's context (stdio: fixed; HTTP: the API key)."""

P = ParamSpec("P")
Result = dict[str, Any]

Role = Literal["user", "assistant", "system", "tool"]
Category = Literal["preference", "knowledge", "context", "behavior", "goal", "correction"]
FactStatusName = Literal["active", "superseded", "removed", "evicted", "all"]

MAX_BUDGET = 10_000_000  # the REST API's bound on token budgets
MAX_PAGE = 500  # the default Limits.max_page_size; the store enforces the configured one
OVERWRITE_ATTEMPTS = 3  # an overwrite that keeps losing races gives up with the error

ConversationId = Annotated[str, Field(description="A conversation id (from create_conversation).")]
OptionalConversation = Annotated[
    str | None,
    Field(description="A conversation id; leave out for the user's own (cross-conversation) one."),
]


@contextmanager
def tool_errors() -> Iterator[None]:
    """Turn a memstrata error into a tool error the model can read."""
    try:
        yield
    except MemstrataError as exc:
        if exc.status < 500:
            raise ToolError(client_message(exc)) from exc
        log.error("MCP tool failed: %s: %s", exc.code, exc.message)
        if exc.status == 503:
            raise ToolError("a backend is unavailable; try again later") from exc
        raise ToolError(f"internal error ({exc.code}); see the server log") from exc


def _reported(fn: Callable[P, Awaitable[Result]]) -> Callable[P, Awaitable[Result]]:
    @functools.wraps(fn)
    async def wrapper(*args: P.args, **kwargs: P.kwargs) -> Result:
        with tool_errors():
            # The REST edge refuses these in the body; stdio has no such edge, so every
            # tool's arguments are checked here too (NaN, lone surrogates, deep nesting).
            strictjson.check(kwargs, what="an argument")
            return await fn(*args, **kwargs)

    return wrapper


#: ``as_of`` of the read tools: answer as memstrata stood at that time.
AS_OF = Field(
    description="ISO 8601 time: answer as of then (facts true then as known then, "
    "messages created by then); default now."
)


def _fact(f: Fact) -> Result:
    d = f.to_dict()
    keep = ("id", "content", "category", "confidence", "status", "origin", "updated_at")
    # The two clocks, when set: event time (valid_from/to) and system time (recorded/superseded).
    clocks = ("valid_from", "valid_to", "recorded_at", "superseded_at")
    return {k: d[k] for k in keep} | {k: d[k] for k in clocks if d.get(k) is not None}


def _hit(h: RecallHit) -> Result:
    m = h.message
    out: Result = {
        "message_id": m.id,
        "conversation_id": h.conversation_id,
        "role": m.role.value,
        "content": m.content,
        "occurred_at": m.occurred_at.isoformat(),
        "score": round(h.score, 6),
        "relevance": h.relevance,
    }
    if h.signals is not None:
        out["signals"] = h.signals
    return out


def _context(ctx: MemoryContext) -> Result:
    r = ctx.report
    return {
        "messages": ctx.messages,
        "report": {
            "budget": r.budget,
            "total_tokens": r.total,
            "tokens_per_tier": {name: t.granted for name, t in r.tiers.items()},
            "dropped": len(r.dropped),
            "newest_turn_over_budget": r.newest_turn_over_budget,
            "leaf_id": r.leaf_id,
            "cache": r.cache.to_dict(),
        },
    }


def _working(wm: WorkingMemory) -> Result:
    return {"exists": True, **wm.to_dict()}


class MemoryTools:
    """The tools over one memory; ``scope_of`` says whose memory each call touches."""

    def __init__(self, memory: AsyncMemory, scope_of: ScopeProvider) -> None:
        self._mem = memory
        self._scope_of = scope_of

    def register(self, server: MCPServer) -> None:
        """Add every tool to ``server``, with hints on which ones only read."""
        reads = ToolAnnotations(read_only_hint=True, open_world_hint=False)
        writes = ToolAnnotations(
            read_only_hint=False, destructive_hint=False, open_world_hint=False
        )
        erases = ToolAnnotations(read_only_hint=False, destructive_hint=True, open_world_hint=False)
        catalogue: list[tuple[Callable[..., Awaitable[Result]], ToolAnnotations]] = [
            (self.create_conversation, writes),
            (self.list_conversations, reads),
            (self.add_message, writes),
            (self.get_history, reads),
            (self.get_context, reads),
            (self.search_memory, reads),
            (self.list_facts, reads),
            (self.add_fact, writes),
            (self.forget_fact, erases),
            (self.remember_conversation, writes),
            (self.get_working_memory, reads),
            (self.update_working_memory, writes),
            (self.get_reply_provenance, reads),
            (self.get_fact_usage, reads),
            (self.memory_health, reads),
            (self.usage, reads),
        ]
        for fn, hints in catalogue:
            server.add_tool(fn, description=inspect.getdoc(fn), annotations=hints)

    # -- conversations and messages ------------------------------------------------------------

    @_reported
    async def create_conversation(
        self,
        ctx: Context,
        title: Annotated[str | None, Field(description="A short title.")] = None,
    ) -> Result:
        """Start a new, empty conversation and return it (its id is what the other tools take)."""
        conv = await self._mem.conversations.create(self._scope_of(ctx), title=title)
        return conv.to_dict()

    @_reported
    async def list_conversations(
        self,
        ctx: Context,
        limit: Annotated[int, Field(ge=1, le=MAX_PAGE, description="How many.")] = 20,
        cursor: Annotated[
            str | None, Field(description="next_cursor of the previous page, for more.")
        ] = None,
    ) -> Result:
        """List the user's conversations, newest first."""
        page = await self._mem.conversations.list(self._scope_of(ctx), limit=limit, cursor=cursor)
        return {"items": [c.to_dict() for c in page.items], "next_cursor": page.next_cursor}

    @_reported
    async def add_message(
        self,
        ctx: Context,
        conversation_id: ConversationId,
        role: Annotated[Role, Field(description="Who speaks.")],
        content: Annotated[str, Field(min_length=1, description="The message text.")],
        parent_id: Annotated[
            str | None,
            Field(
                description="Reply to this message instead of the newest one (a sibling of "
                "an existing reply is a regeneration)."
            ),
        ] = None,
        tool_call_id: Annotated[
            str | None, Field(description="For role tool: the call this result answers.")
        ] = None,
        context_id: Annotated[
            str | None,
            Field(
                description="For an assistant reply: the context_id get_context returned with "
                "record, linking the reply to what its prompt held."
            ),
        ] = None,
    ) -> Result:
        """Append a message to a conversation, after its newest message unless parent_id says
        otherwise, and return the stored message."""
        fields: dict[str, Any] = {"role": role, "content": content}
        if parent_id is not None:  # left out: after the active leaf
            fields["parent_id"] = parent_id
        if tool_call_id is not None:
            fields["tool_call_id"] = tool_call_id
        if context_id is not None:
            fields["context_id"] = context_id
        msg = await self._mem.messages.append(self._scope_of(ctx), conversation_id, **fields)
        return msg.to_dict()

    @_reported
    async def get_history(
        self,
        ctx: Context,
        conversation_id: ConversationId,
        max_tokens: Annotated[
            int, Field(ge=1, le=MAX_BUDGET, description="Token budget for the messages.")
        ] = 2000,
    ) -> Result:
        """The conversation's current branch, oldest first: the newest whole turns that fit
        max_tokens (leading system messages always kept)."""
        h = await self._mem.history(self._scope_of(ctx), conversation_id, max_tokens=max_tokens)
        return h.to_dict()

    @_reported
    async def get_context(
        self,
        ctx: Context,
        conversation_id: ConversationId,
        budget: Annotated[
            int, Field(ge=1, le=MAX_BUDGET, description="Token budget for everything.")
        ] = 8000,
        query: Annotated[
            str | None,
            Field(
                description="What to recall past messages about (default: the newest user message)."
            ),
        ] = None,
        record: Annotated[
            bool,
            Field(
                description="Keep a record of what this context holds (prompt provenance) and "
                "return its context_id, to pass to add_message with the reply."
            ),
        ] = False,
        as_of: Annotated[str | None, AS_OF] = None,
        layout: Annotated[
            Literal["cache", "classic"] | None,
            Field(
                description="Message order: cache (a stable prefix providers can cache, "
                "volatile blocks last; the default) or classic (every block before the window)."
            ),
        ] = None,
    ) -> Result:
        """Messages ready for the next model call under one token budget: recent turns plus
        the summary, remembered facts, profile, working memory and recalled past messages;
        the report gives the tokens each part took, how many items were dropped, and what a
        provider's prompt cache can serve (cache.prefix_tokens, cache.breakpoint)."""
        c = await self._mem.context(
            self._scope_of(ctx),
            conversation_id,
            budget=budget,
            query=query,
            record=record or None,
            as_of=as_of,
            layout=layout,
        )
        out = _context(c)
        if c.context_id is not None:
            out["context_id"] = c.context_id
        return out

    # -- recall --------------------------------------------------------------------------------

    @_reported
    async def search_memory(
        self,
        ctx: Context,
        query: Annotated[str, Field(min_length=1, description="What to look for.")],
        k: Annotated[int, Field(ge=1, le=MAX_K, description="How many messages.")] = 10,
        conversation_id: Annotated[
            str | None, Field(description="Search only this conversation.")
        ] = None,
        leaf_id: Annotated[
            str | None,
            Field(description="With conversation_id: only the branch ending at this message."),
        ] = None,
        include_other_branches: Annotated[
            bool,
            Field(description="Also messages off each conversation's active branch."),
        ] = False,
        as_of: Annotated[str | None, AS_OF] = None,
        min_relevance: Annotated[
            float,
            Field(ge=0, le=1, description="Leave out hits less relevant than this (0..1)."),
        ] = 0.0,
        explain: Annotated[bool, Field(description="Add each hit's per-signal scores.")] = False,
        explain_ids: Annotated[
            list[str] | None,
            Field(
                max_length=MAX_EXPLAIN_IDS,
                description="Message ids to account for: returned, or why not.",
            ),
        ] = None,
    ) -> Result:
        """Search the user's past messages across all conversations (keywords and meaning),
        best match first; each hit has a relevance in 0..1. ``pending`` counts messages
        not yet searchable by meaning."""
        hits = await self._mem.recall.search(
            self._scope_of(ctx),
            query,
            k,
            conversation_id=conversation_id,
            leaf_id=leaf_id,
            include_other_branches=include_other_branches,
            as_of=as_of,
            min_relevance=min_relevance,
            explain=explain,
            explain_ids=explain_ids or (),
        )
        out: Result = {"hits": [_hit(h) for h in hits], "pending": hits.pending}
        if hits.explained:
            out["explained"] = [e.to_dict() for e in hits.explained]
        return out

    # -- long-term facts -----------------------------------------------------------------------

    @_reported
    async def list_facts(
        self,
        ctx: Context,
        status: Annotated[
            FactStatusName, Field(description="Which facts; active ones are in use.")
        ] = "active",
        limit: Annotated[int, Field(ge=1, le=MAX_PAGE, description="How many.")] = 100,
        as_of: Annotated[str | None, AS_OF] = None,
        known_at: Annotated[
            str | None,
            Field(
                description="ISO 8601 time: as memstrata knew it then (default: as_of; "
                "now for what is known now about as_of)."
            ),
        ] = None,
    ) -> Result:
        """List the facts remembered about the user, newest first: by default those true
        now; with as_of, those true then as known then."""
        page = await self._mem.facts.list(
            self._scope_of(ctx), status=status, limit=limit, as_of=as_of, known_at=known_at
        )
        return {"items": [_fact(f) for f in page.items], "next_cursor": page.next_cursor}

    @_reported
    async def add_fact(
        self,
        ctx: Context,
        content: Annotated[
            str, Field(min_length=1, description="The fact, one short sentence about the user.")
        ],
        category: Annotated[Category, Field(description="What kind of fact.")] = "context",
        confidence: Annotated[float, Field(ge=0.0, le=1.0, description="How sure, 0 to 1.")] = 1.0,
    ) -> Result:
        """Remember a fact about the user (kept until someone removes it)."""
        fact = await self._mem.facts.add(
            self._scope_of(ctx), content, category=category, confidence=confidence
        )
        return _fact(fact)

    @_reported
    async def forget_fact(
        self,
        ctx: Context,
        fact_id: Annotated[str, Field(description="The fact's id (from list_facts).")],
    ) -> Result:
        """Erase a fact about the user, with its history."""
        await self._mem.facts.delete(self._scope_of(ctx), fact_id)
        return {"deleted": fact_id}

    @_reported
    async def remember_conversation(
        self,
        ctx: Context,
        conversation_id: ConversationId,
        leaf_id: Annotated[
            str | None, Field(description="The branch's newest message (default: the newest).")
        ] = None,
    ) -> Result:
        """Queue long-term memory extraction of a conversation now: the facts and profile it
        reveals about the user are learned in the background. Returns the queued job."""
        job = await self._mem.longterm.observe(
            self._scope_of(ctx), conversation_id, leaf_id=leaf_id
        )
        return {"job": job.to_dict()}

    # -- working memory ------------------------------------------------------------------------

    async def _working_or_none(self, scope: Scope, cid: str | None) -> WorkingMemory | None:
        try:
            return await self._mem.working.get(scope, conversation_id=cid)
        except NotFound as exc:
            if exc.detail.get("kind") == "working_memory":
                return None
            raise  # an unknown conversation stays an error

    @_reported
    async def get_working_memory(
        self, ctx: Context, conversation_id: OptionalConversation = None
    ) -> Result:
        """Read the working-memory notes (the user's, or one conversation's); exists is false
        and version 0 when none were written yet."""
        wm = await self._working_or_none(self._scope_of(ctx), conversation_id)
        if wm is None:
            return {"exists": False, "conversation_id": conversation_id, "version": 0}
        return _working(wm)

    @_reported
    async def update_working_memory(
        self,
        ctx: Context,
        content: Annotated[
            str, Field(description="The whole new document (markdown; JSON text for a JSON one).")
        ],
        conversation_id: OptionalConversation = None,
        expected_version: Annotated[
            int | None,
            Field(
                ge=0,
                description="Write only if the document is still at this version (0: only if "
                "none exists); leave out to overwrite.",
            ),
        ] = None,
    ) -> Result:
        """Replace the working-memory notes (the user's, or one conversation's) and return
        the stored document with its new version."""
        scope = self._scope_of(ctx)
        attempt = 0
        while True:
            attempt += 1
            current = await self._working_or_none(scope, conversation_id)
            value = _parsed(content) if current and current.format == "json" else content
            try:
                wm = await self._mem.working.put(
                    scope, value, conversation_id=conversation_id, expected_version=expected_version
                )
            except PreconditionFailed:
                if expected_version is not None or attempt >= OVERWRITE_ATTEMPTS:
                    raise
                continue  # overwrite: another writer got in between; read again and retry
            return _working(wm)

    # -- prompt provenance ---------------------------------------------------------------------

    @_reported
    async def get_reply_provenance(
        self,
        ctx: Context,
        conversation_id: ConversationId,
        message_id: Annotated[str, Field(description="The assistant reply's id.")],
    ) -> Result:
        """What the model saw before a reply: the recorded context linked to it (its budget,
        report and the ids of every injected message, fact, summary, working memory and plan,
        each with its state now: a deleted fact shows as a tombstone id). record is null when
        no recorded context is linked to the reply."""
        found = await self._mem.provenance.get(self._scope_of(ctx), conversation_id, message_id)
        return found.to_dict()

    @_reported
    async def get_fact_usage(
        self,
        ctx: Context,
        fact_id: Annotated[str, Field(description="The fact's id (from list_facts).")],
        limit: Annotated[int, Field(ge=1, le=MAX_PAGE, description="How many.")] = 20,
        cursor: Annotated[
            str | None, Field(description="next_cursor of the previous page, for more.")
        ] = None,
    ) -> Result:
        """The replies whose recorded prompts held a fact, newest first (conversation,
        message, context record and when)."""
        page = await self._mem.provenance.fact_usage(
            self._scope_of(ctx), fact_id, limit=limit, cursor=cursor
        )
        return {"items": [u.to_dict() for u in page.items], "next_cursor": page.next_cursor}

    # -- memory health ---------------------------------------------------------------------

    @_reported
    async def memory_health(
        self,
        ctx: Context,
        stale_days: Annotated[
            int, Field(ge=0, le=36500, description="Age after which an untouched fact is stale.")
        ] = 90,
    ) -> Result:
        """Check the user's long-term memory: near-duplicate, contradicting, stale and
        unused facts (counts and examples), and its sizes."""
        report = await self._mem.memory.health(self._scope_of(ctx), stale_days=stale_days)
        return report.to_dict()

    # -- usage ---------------------------------------------------------------------------------

    @_reported
    async def usage(
        self,
        ctx: Context,
        start: Annotated[
            str | None,
            Field(description="ISO 8601 start (inclusive); leave out for 30 days before the end."),
        ] = None,
        end: Annotated[
            str | None, Field(description="ISO 8601 end (exclusive); leave out for now.")
        ] = None,
        group_by: Annotated[
            Literal["purpose", "user"], Field(description="Totals per purpose or per user.")
        ] = "purpose",
    ) -> Result:
        """The model calls and tokens spent for this user's memory (extraction, compaction,
        consolidation, embedding, query) over a period, with the total."""
        report = await self._mem.usage.report(
            self._scope_of(ctx), start=start, end=end, group_by=group_by
        )
        return report.to_dict()


def _parsed(text: str) -> Any:
    try:
        return json.loads(text)
    except json.JSONDecodeError as exc:
        raise InvalidInput(
            f"this working memory is a JSON document: content is not JSON ({exc.msg})",
            field="content",
        ) from None
