"""Generated from ``_async.py`` by ``scripts/unasync.py``: do not edit."""

from __future__ import annotations

import functools
from collections.abc import Mapping
from dataclasses import replace
from datetime import datetime
from types import TracebackType
from typing import TYPE_CHECKING, Any, overload

from memstrata import conversation as ops
from memstrata import provenance
from memstrata.api._sync_admin import Admin
from memstrata.api._sync_base import SubAPI
from memstrata.api._sync_context import Compaction
from memstrata.api._sync_graph import Graphs
from memstrata.api._sync_jobs import Jobs
from memstrata.api._sync_longterm import Facts, LongTerm
from memstrata.api._sync_memory import MemoryMaintenance
from memstrata.api._sync_nodes import Nodes
from memstrata.api._sync_provenance import Provenance
from memstrata.api._sync_recall import Recall
from memstrata.api._sync_receipts import LOCAL_ACTOR, Receipts, settle
from memstrata.api._sync_retention import Retention
from memstrata.api._sync_state import (
    Checkpoints,
    Iterations,
    Plans,
    Snapshots,
    Working,
)
from memstrata.api._sync_transfer import Transfer
from memstrata.api._sync_usage import Usage
from memstrata.api.core import Core
from memstrata.config import Settings
from memstrata.context import CompactionResult, Context, prefix
from memstrata.conversation.history import QUICK_HISTORY_ROWS, History
from memstrata.conversation.splice import DELETE_MODES
from memstrata.embeddings.port import Embedder
from memstrata.errors import InvalidInput
from memstrata.llm import LLM
from memstrata.recall.catchup import CatchUp
from memstrata.receipts import Receipt, UserDeleted
from memstrata.receipts import ops as receipt_ops
from memstrata.scoped import Scoped
from memstrata.storage import tenancy
from memstrata.storage.records import to_micros
from memstrata.storage.tenancy import ApiKey, Principal
from memstrata.types import Conversation, Message, MessagePatch, NewMessage, Page, Scope
from memstrata.validation import build
from memstrata.validation import checked_scope as _scope

if TYPE_CHECKING:
    from memstrata.client import RemoteMemory

__all__ = [
    "Conversations",
    "Jobs",
    "Keys",
    "Memory",
    "Messages",
    "Users",
]


class Conversations(SubAPI):
    """Create, list, update and delete conversations (message trees)."""

    def create(
        self,
        scope: Scope,
        *,
        title: str | None = None,
        metadata: dict[str, Any] | None = None,
        id: str | None = None,
    ) -> Conversation:
        rt = self._core.rt
        return self._write(
            ops.create_conversation,
            rt,
            _scope(scope),
            title=title,
            metadata=metadata,
            conversation_id=id,
        )

    def get(self, scope: Scope, conversation_id: str) -> Conversation:
        return self._read(ops.get_conversation, _scope(scope), conversation_id)

    def list(
        self, scope: Scope, *, limit: int | None = None, cursor: str | None = None
    ) -> Page[Conversation]:
        rt = self._core.rt
        return self._read(
            ops.list_conversations, rt, _scope(scope), limit=limit, cursor=cursor
        )

    def update(
        self,
        scope: Scope,
        conversation_id: str,
        *,
        title: str | None = None,
        metadata: dict[str, Any] | None = None,
        active_leaf_id: str | None = None,
    ) -> Conversation:
        """Change the title, metadata and/or active leaf (one transaction; None leaves a field as is)."""
        rt = self._core.rt
        return self._write(
            ops.update_conversation,
            rt,
            _scope(scope),
            conversation_id,
            title=title,
            metadata=metadata,
            active_leaf_id=active_leaf_id,
        )

    def set_active_leaf(
        self, scope: Scope, conversation_id: str, message_id: str
    ) -> Conversation:
        """Choose the branch that appends and ``history()`` follow by default."""
        return self.update(scope, conversation_id, active_leaf_id=message_id)

    def delete(
        self, scope: Scope, conversation_id: str, *, actor: str | None = None
    ) -> Receipt:
        """Delete a conversation and everything derived from it; returns the deletion's
        receipt (``actor``: who asked, recorded on it)."""
        rt = self._core.rt
        deletion = self._write(
            receipt_ops.delete_conversation,
            rt,
            _scope(scope),
            conversation_id,
            rt.make_id(),
            actor or LOCAL_ACTOR,
        )
        return settle(self._core, deletion)


class Messages(SubAPI):
    """Append, complete, read and walk messages of a conversation."""

    def append(
        self,
        scope: Scope,
        conversation_id: str,
        message: NewMessage | Mapping[str, Any] | None = None,
        /,
        **fields: Any,
    ) -> Message:
        """Append a message (see :class:`~memstrata.types.NewMessage` for the fields).

        Leaving ``parent_id`` out appends after the active leaf; ``parent_id=None``
        starts a new root; an id makes a child (a regeneration or an edit).
        """
        stored, _ = self.put(scope, conversation_id, message, **fields)
        return stored

    def put(
        self,
        scope: Scope,
        conversation_id: str,
        message: NewMessage | Mapping[str, Any] | None = None,
        /,
        **fields: Any,
    ) -> tuple[Message, bool]:
        """Like :meth:`append`, also telling whether it was created (False: a replay of the same id).

        ``context_id`` (a field like the others) links this assistant reply to the context
        record it answered (``mem.context(..., record=True)``), in the same transaction."""
        if isinstance(message, Mapping) and "context_id" in message:
            message = dict(message)
            fields.setdefault("context_id", message.pop("context_id"))
        context_id = fields.pop("context_id", None)
        new = build(NewMessage, message, fields)
        rt = self._core.rt
        owner = _scope(scope)
        if context_id is None:
            stored, created = self._write(ops.append_message, rt, owner, conversation_id, new)
        elif not isinstance(context_id, str):
            raise InvalidInput("context_id must be a string", field="context_id")
        else:
            stored, created = self._write(
                provenance.append_linked, rt, owner, conversation_id, new, context_id
            )
        if created:
            CatchUp(self._core).at_append(owner, stored)
        return stored, created

    def complete(
        self,
        scope: Scope,
        conversation_id: str,
        message_id: str,
        patch: MessagePatch | Mapping[str, Any] | None = None,
        /,
        **fields: Any,
    ) -> Message:
        """Complete a pending assistant message with its final content."""
        p = build(MessagePatch, patch, fields)
        rt = self._core.rt
        owner = _scope(scope)
        done: Message = self._write(
            ops.patch_message, rt, owner, conversation_id, message_id, p
        )
        CatchUp(self._core).at_append(owner, done)
        return done

    def get(self, scope: Scope, conversation_id: str, message_id: str) -> Message:
        return self._read(ops.get_message, _scope(scope), conversation_id, message_id)

    def find(self, scope: Scope, message_id: str) -> Message:
        """A message of the scope by its id alone (its ``conversation_id`` says where it
        is); NotFound in another scope, Conflict when the scope uses that id in two
        conversations (ids are unique per conversation)."""
        return self._read(ops.find_message, _scope(scope), message_id)

    def delete(
        self,
        scope: Scope,
        conversation_id: str,
        message_id: str,
        *,
        actor: str | None = None,
        mode: str = "subtree",
    ) -> Receipt:
        """Delete a message and the subtree under it (n8n's ``deleteMessages``, on a tree).
        The active leaf moves to the message's parent when
        it was in the subtree; summaries covering the messages are invalidated; recall
        and facts' provenance forget them. NotFound in another conversation or scope.
        Returns the deletion's receipt.

        ``mode="splice"`` deletes the message alone, as n8n does: its children are
        re-attached to its parent (roots, for a root), keeping their own replies."""
        if mode not in DELETE_MODES:
            raise InvalidInput(f"mode must be one of {', '.join(DELETE_MODES)}", field="mode")
        rt = self._core.rt
        deletion = self._write(
            functools.partial(receipt_ops.delete_message, splice=mode == "splice"),
            rt,
            _scope(scope),
            conversation_id,
            message_id,
            rt.make_id(),
            actor or LOCAL_ACTOR,
        )
        return settle(self._core, deletion)

    def leaves(
        self,
        scope: Scope,
        conversation_id: str,
        *,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[Message]:
        rt = self._core.rt
        return self._read(
            ops.list_leaves, rt, _scope(scope), conversation_id, limit=limit, cursor=cursor
        )

    def path(
        self, scope: Scope, conversation_id: str, leaf_id: str | None = None
    ) -> list[Message]:
        """The whole branch from the root to ``leaf_id`` (default: the active leaf), oldest first."""
        return self._read(ops.path, _scope(scope), conversation_id, leaf_id)

    def list(
        self,
        scope: Scope,
        conversation_id: str,
        *,
        limit: int | None = None,
        cursor: str | None = None,
    ) -> Page[Message]:
        """Every message of the conversation, all branches, oldest first (parents before children)."""
        rt = self._core.rt
        return self._read(
            ops.list_messages, rt, _scope(scope), conversation_id, limit=limit, cursor=cursor
        )


class Users(SubAPI):
    """Users of a tenant (administration)."""

    def list(
        self, tenant: str, *, limit: int | None = None, cursor: str | None = None
    ) -> Page[tuple[str, datetime]]:
        rt = self._core.rt
        return self._read(ops.list_users, rt, tenant, limit=limit, cursor=cursor)

    def delete(self, scope: Scope, *, actor: str | None = None) -> UserDeleted:
        """Delete ``scope.user`` of ``scope.tenant`` and everything it owns; returns the conversations removed
        (an ``int`` carrying the deletion's receipt as ``.receipt``)."""
        rt = self._core.rt
        s = _scope(scope)
        # The user's buffered usage rows first, so the cascade re-attributes them too.
        self._core.flush_usage()
        deletion = self._write(
            receipt_ops.delete_user, rt, s.tenant, s.user, rt.make_id(), actor or LOCAL_ACTOR
        )
        self._core.usage_ledger.forget_user(s.tenant, s.user)  # those noted meanwhile
        if self._core.sealer is not None:
            # After the cascade committed: from here on nothing of the user opens, in the
            # store or in any earlier backup of it.
            self._core.sealer.destroy(s.tenant, s.user)
            self._write(receipt_ops.mark_key_destroyed, deletion[1].id)
            deletion = (deletion[0], replace(deletion[1], key_destroyed=True), deletion[2])
        receipt = settle(self._core, deletion)
        return UserDeleted(int(deletion[0]), receipt)


class Keys(SubAPI):
    """API keys for the REST and MCP surfaces; only their hashes are stored."""

    def create(
        self,
        tenant: str,
        *,
        user: str | None = None,
        admin: bool = False,
        label: str | None = None,
        expires_at: datetime | None = None,
    ) -> tuple[ApiKey, str]:
        """Create a key for a user (or an admin key for the tenant); returns the record and the
        secret. ``expires_at``: refused from then on, like a revoked key."""
        if admin == (user is not None):
            raise InvalidInput("give exactly one of user=... or admin=True")
        Scope(tenant, user or "admin")  # validates the names
        now = self._core.rt.clock()
        until = None if expires_at is None else to_micros(expires_at)
        return self._write(tenancy.create_key, tenant, user, admin, label, now, until)

    def list(self, tenant: str | None = None) -> list[ApiKey]:
        return self._read(tenancy.list_keys, tenant)

    def revoke(self, key_id: str) -> None:
        now = self._core.rt.clock()
        self._write(tenancy.revoke_key, key_id, now)

    def authenticate(self, secret: str) -> Principal | None:
        """The live (not revoked, not expired) key's principal, or None."""
        now = self._core.rt.clock()
        return self._quick_read(tenancy.authenticate, secret, now)  # one indexed row

    def rotate(
        self, key_id: str, *, expires_at: datetime | None = None
    ) -> tuple[ApiKey, str]:
        """Replace a live key: the old secret stops working as the new one is made."""
        now = self._core.rt.clock()
        until = None if expires_at is None else to_micros(expires_at)
        return self._write(tenancy.rotate_key, key_id, now, until)


class Memory(SubAPI):
    """One memory store. Open with :meth:`open`; close with :meth:`close` or ``with``."""

    def __init__(self, core: Core) -> None:
        super().__init__(core)
        # Job handlers get the sync facade (``handler(job, memory)``), whichever facade the
        # memory was opened with.
        core.serve_jobs_with(Memory)
        self.conversations = Conversations(core)
        self.messages = Messages(core)
        self.users = Users(core)
        self.keys = Keys(core)
        self.jobs = Jobs(core)
        self.nodes = Nodes(core)
        self.recall = Recall(core)
        self.working = Working(core)
        self.plans = Plans(core)
        self.iterations = Iterations(core)
        self.checkpoints = Checkpoints(core)
        self.snapshots = Snapshots(core)
        self.compaction = Compaction(core)
        self.facts = Facts(core)
        self.longterm = LongTerm(core)
        self.transfer = Transfer(core)
        self.retention = Retention(core)
        self.graphs = Graphs(core)
        self.provenance = Provenance(core)
        self.memory = MemoryMaintenance(core)
        self.usage = Usage(core)
        self.receipts = Receipts(core)
        self.admin = Admin(core)

    @classmethod
    @overload
    def open(
        cls,
        url: str | None = None,
        *,
        blobs: str | None = None,
        redis: str | None = None,
        settings: Settings | None = None,
        embedder: Embedder | None = None,
        llm: LLM | None = None,
    ) -> Memory: ...

    @classmethod
    @overload
    def open(cls, url: str, *, api_key: str, timeout: float = 30.0) -> RemoteMemory: ...

    @classmethod
    def open(
        cls,
        url: str | None = None,
        *,
        blobs: str | None = None,
        redis: str | None = None,
        settings: Settings | None = None,
        embedder: Embedder | None = None,
        llm: LLM | None = None,
        api_key: str | None = None,
        timeout: float = 30.0,
    ) -> Memory | RemoteMemory:
        """Open a store: the embedded default under ``MEMSTRATA_HOME`` (``./.memstrata``), or
        ``url`` (``sqlite:///...``, ``postgresql://...``); an ``http(s)://`` URL with an
        ``api_key`` gives the same facade over a memstrata server's REST API.

        ``embedder`` and ``llm`` hand in models instead of those the settings name
        (``MEMSTRATA_EMBEDDER``, ``MEMSTRATA_LLM_*``): recall embeds with ``embedder``
        (long-term memory's near-duplicate check follows it); compaction, long-term
        extraction and consolidation call ``llm``. Tests swap them for a block with
        :func:`memstrata.testing.override`."""
        if url is not None and url.startswith(("http://", "https://")):
            if api_key is None:
                raise InvalidInput("an http(s) URL needs api_key=...", field="api_key")
            if blobs or redis or settings or embedder or llm:
                raise InvalidInput("blobs, redis, settings, embedder and llm belong to the server")
            # Imported here, not above: the client needs httpx, which embedded use does without.
            from memstrata.client import RemoteMemory

            return RemoteMemory(url, api_key, timeout=timeout)
        if api_key is not None:
            raise InvalidInput("api_key is only for an http(s) server URL", field="api_key")
        core = Core.open(url, blobs=blobs, redis=redis, settings=settings, embedder=embedder)
        if llm is not None:
            core.context.llm = llm
        return cls(core)

    @property
    def core(self) -> Core:
        return self._core

    def scoped(self, scope: Scope) -> Scoped:
        """This memory bound to ``scope``: ``mem.scoped(scope).messages.append(cid, ...)``,
        ``.history(cid)``, ... take no scope argument (see :mod:`memstrata.scoped`)."""
        return Scoped(self, scope)


    def history(
        self,
        scope: Scope,
        conversation_id: str,
        leaf_id: str | None = None,
        max_tokens: int | None = 2000,
        max_messages: int | None = 500,
        model: str | None = None,
        *,
        before: str | None = None,
    ) -> History:
        """Token-budgeted history of the branch ending at ``leaf_id`` (default: the active leaf).

        ``None`` for ``max_tokens`` or ``max_messages`` lifts that limit. ``before`` (a
        message id, instead of ``leaf_id``) ends the history just before that message's
        turn, so ``[*history, query]`` never holds the query twice (Dify's pattern).
        """
        rt = self._core.rt
        # Bounded (a row cap, the store's own token counts, one walk from the leaf): quick.
        quick = before is None and model is None
        # (The operation checks the limits; a wrong type is its InvalidInput, not a TypeError.)
        quick = quick and type(max_messages) is int and max_messages <= QUICK_HISTORY_ROWS
        return (self._quick_read if quick else self._read)(
            ops.history,
            rt,
            _scope(scope),
            conversation_id,
            leaf_id=leaf_id,
            max_tokens=max_tokens,
            max_messages=max_messages,
            model=model,
            before=before,
            read_ahead=self._core.engine.dialect == "postgres",
        )

    def context(
        self,
        scope: Scope,
        conversation_id: str,
        leaf_id: str | None = None,
        budget: int = 8000,
        query: str | None = None,
        model: str | None = None,
        *,
        task: str | None = None,
        record: bool | None = None,
        as_of: datetime | str | None = None,
        layout: str | None = None,
    ) -> Context:
        """Messages for the next model call under one token budget, and a report on them.

        ``task`` names a task whose recent failed attempts (``mem.iterations``) go into an
        ``iterations`` block, for a sub-agent's briefing; without it that tier is off.
        ``as_of`` (a ``datetime`` or ISO 8601 text) assembles the derived tiers as of that
        time: the facts true then as known then, the profile recorded by then, recalled
        messages created by then (the window is the branch ending at ``leaf_id``).
        When the branch has outgrown its summary, a debounced compaction job is queued.
        ``record`` stores a context record (prompt provenance; None: the
        ``context_record`` setting) and sets ``context_id``: append the reply with
        ``context_id=ctx.context_id`` to link the two.
        ``layout`` orders the messages: ``"cache"`` (the default: a prefix providers can
        cache, see ``ctx.report.cache``, ``ctx.to_anthropic()``) or ``"classic"``; None: the
        ``context_layout`` setting.
        """
        ctx = self.compaction.assemble(
            scope,
            conversation_id,
            leaf_id=leaf_id,
            budget=budget,
            query=query,
            model=model,
            task=task,
            as_of=as_of,
            layout=layout,
        )
        self._note_prefix(scope, conversation_id, ctx)
        kit = self._core.context
        if ctx.report.compaction_due and kit.auto_compact:
            self.compaction.schedule(
                scope,
                conversation_id,
                leaf_id=ctx.report.leaf_id,
                delay_s=kit.debounce_s,
                max_wait_s=kit.max_wait_s,
                keep_from=ctx.compact_before,
            )
        if self._core.settings.context_record if record is None else record:
            rid = self.provenance.record(scope, conversation_id, ctx, budget)
            ctx = replace(ctx, context_id=rid)
        return ctx

    def _note_prefix(self, scope: Scope, conversation_id: str, ctx: Context) -> None:
        """Set ``ctx.report.cache.prefix_tokens``: the tokens ``ctx`` shares with the previous
        context of its branch, whose fingerprint ``ctx``'s then replaces."""
        fp = ctx.fingerprint
        if fp is None:
            return  # an empty conversation: nothing to compare or keep
        on_branch = frozenset(m.id for m in (*ctx.system, *ctx.window)) | {fp.leaf_id}
        ctx.report.cache.prefix_tokens = self._write(
            prefix.remember, self._core.rt, _scope(scope), conversation_id, fp, on_branch
        )

    def compact(
        self, scope: Scope, conversation_id: str, leaf_id: str | None = None
    ) -> CompactionResult:
        """Compact the branch now (see :meth:`Compaction.run`)."""
        return self.compaction.run(scope, conversation_id, leaf_id=leaf_id)

    def close(self) -> None:
        """Stop this process's worker (running jobs finish) and close the store."""
        self._core.close()

    def __enter__(self) -> Memory:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.close()
