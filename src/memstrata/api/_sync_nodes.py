"""Generated from ``_async_nodes.py`` by ``scripts/unasync.py``: do not edit."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from types import TracebackType
from typing import Any, TypeVar

from memstrata.api._sync_base import SubAPI
from memstrata.api.core import Core
from memstrata.blobs import BlobOp
from memstrata.conversation.history import HistoryPlanner, check_limits
from memstrata.errors import ConfigurationError, InvalidInput
from memstrata.jobs import ops as jobs_ops
from memstrata.nodes import log, turn_ids
from memstrata.nodes import ops as nodes_ops
from memstrata.nodes.layout import NodeKey, Turn
from memstrata.nodes.ops import GcReport
from memstrata.nodes.service import COMPACT_AFTER, blobs_for, owned
from memstrata.nodes.thread import SEEK, FileResolver, NodeHistory, ThreadWalker, finish
from memstrata.nodes.validate import FileLike, check_turn, held_turn
from memstrata.tokens import get_tokenizer
from memstrata.types import Scope
from memstrata.validation import checked_scope as _scope

__all__ = ["NodeMemory", "Nodes"]

T = TypeVar("T")


def _key(scope: Scope, app_id: str, conversation_id: str | None, node_id: str) -> NodeKey:
    if not conversation_id:
        raise ConfigurationError(
            "node memory needs a conversation id: it is kept per (app, conversation, node), "
            "so it works only in a chat flow; use the conversation memory mode without one"
        )
    return NodeKey(_scope(scope).tenant, app_id, conversation_id, node_id)


class NodeMemory(SubAPI):
    """The memory of one workflow node in one conversation.

    ``add_turn`` buffers; ``flush`` makes the buffered turns durable (one new
    object, whatever the history's length); ``with`` flushes on exit. A
    failed flush keeps the buffer, so a later flush can succeed.
    """

    def __init__(
        self, core: Core, scope: Scope, key: NodeKey, resolver: FileResolver | None = None
    ) -> None:
        super().__init__(core)
        self._scope = scope
        self.key = key
        self._resolver = resolver
        self._buffer: list[Turn] = []

    def _owned(self, op: BlobOp[T]) -> BlobOp[T]:
        return owned(self._core, op, self.key.tenant, self._scope.user)

    @property
    def pending(self) -> list[Turn]:
        """Turns added but not flushed yet, oldest first."""
        return list(self._buffer)

    def add_turn(
        self,
        message_id: str,
        parent_message_id: str | None = None,
        user_content: str = "",
        user_files: Sequence[FileLike] | None = None,
        assistant_content: str = "",
        assistant_files: Sequence[FileLike] | None = None,
    ) -> Turn:
        """Buffer one dialogue turn (a user input and the answer); durable at :meth:`flush`."""
        new = check_turn(
            message_id=message_id,
            parent_message_id=parent_message_id,
            user_content=user_content,
            user_files=user_files,
            assistant_content=assistant_content,
            assistant_files=assistant_files,
            max_content_bytes=self._core.rt.limits.max_content_bytes,
        )
        held = held_turn(self._buffer, new)
        if held is not None:
            return held  # a repeated call (a retry) adds nothing
        rt = self._core.rt
        turn = Turn(
            uid=rt.make_id(),
            message_id=new.message_id,
            parent_message_id=new.parent_message_id,
            user_content=new.user_content,
            user_files=new.user_files,
            assistant_content=new.assistant_content,
            assistant_files=new.assistant_files,
            created_at=rt.clock(),
        )
        self._buffer.append(turn)
        return turn

    def flush(self) -> int:
        """Write the buffered turns as one new object; returns how many became durable.

        Idempotent on ``message_id``: turns of a message already stored with the same
        content are a replay and write nothing. With other content they replace the
        stored ones, as Dify overwrites a run's turn: history shows the new turns in the
        old ones' place, and the old ones stay in the log (:meth:`message_log`). A node
        in a loop adds all its turns of one message in one flush.
        """
        return len(self._flush())

    def _flush(self) -> list[Turn]:
        """Flush; returns the buffered turns as stored (a replacement carries its revision),
        or nothing when they were all replays."""
        if not self._buffer:
            return []
        turns = list(self._buffer)
        core, rt, scope, key = self._core, self._core.rt, self._scope, self.key
        sealer = core.sealer
        wanted = turn_ids.digests(
            turns, None if sealer is None else sealer.digest_key(key.tenant, scope.user)
        )
        replayed, replaced = self._read(nodes_ops.compare, scope, key, wanted)
        if replaced:
            revision = rt.make_id()
            turns = [
                dataclasses.replace(t, revision=revision) if t.message_id in replaced else t
                for t in turns
            ]
        fresh = [t for t in turns if t.message_id not in replayed]
        if not fresh:
            del self._buffer[: len(turns)]
            return []
        gen, pending = self._write(nodes_ops.touch, rt, scope, key, 1)
        writing = log.write_segment(key.prefix(gen), fresh)
        blobs_for(core).run(owned(core, writing, key.tenant, scope.user))
        ids = {mid: d.now for mid, d in wanted.items() if mid not in replayed}
        now = rt.clock()
        self._write(nodes_ops.record_turns, key, gen, ids, now)
        del self._buffer[: len(turns)]
        if pending >= COMPACT_AFTER:
            self._queue_compaction(gen)
        return turns

    def message_log(self, message_id: str) -> list[Turn]:
        """Every stored turn of ``message_id``, replaced ones included, oldest first.

        Reads the whole node memory: for audits, not for building prompts.
        """
        found = self._read(nodes_ops.readable, self._scope, self.key)
        gen = found.generation
        if gen is None or message_id in found.erasing:
            return []
        prefix = self.key.prefix(gen)
        reading = log.message_log(prefix, message_id)
        return blobs_for(self._core).run(self._owned(reading))

    def _queue_compaction(self, gen: str) -> None:
        core, rt, key = self._core, self._core.rt, self.key
        payload = {
            "tenant": key.tenant,
            "app_id": key.app_id,
            "conversation_id": key.conversation_id,
            "node_id": key.node_id,
            "generation": gen,
        }
        job_id, now = rt.make_id(), rt.clock()
        self._write(
            jobs_ops.enqueue,
            job_id=job_id,
            kind=nodes_ops.COMPACT_JOB,
            key=key.prefix(gen),
            tenant=key.tenant,
            user=self._scope.user,
            agent=self._scope.agent,
            conversation_id=key.conversation_id,
            payload=payload,
            flags=None,
            delay_s=0.0,
            max_wait_s=0.0,
            max_attempts=5,
            now=now,
        )
        core.job_queued()

    def history(
        self,
        current_message_id: str | None = None,
        *,
        parent_message_id: Any = SEEK,
        max_tokens: int | None = 2000,
        max_messages: int | None = 500,
        model: str | None = None,
        resolver: FileResolver | None = None,
        skip_damaged: bool = False,
    ) -> NodeHistory:
        """The thread ending at ``current_message_id`` (its turns included), token-budgeted.

        Without ``current_message_id`` the thread starts at the newest turn. A current
        message with no turn stored or buffered yet (Dify asks for history before it
        stores the turn being answered) gets the thread ending at the newest stored turn;
        pass its ``parent_message_id`` to say which thread it follows instead (``None``:
        it starts a thread). Unflushed turns count as the newest. A damaged object
        raises Corruption naming its key, or with ``skip_damaged`` is left out and
        listed in ``damaged``.
        """
        check_limits(max_tokens, max_messages)
        rt, scope, key = self._core.rt, self._scope, self.key
        tokenizer = rt.tokenizer if model is None else get_tokenizer(model)
        buffered = list(reversed(self._buffer))
        seek = current_message_id
        look = seek is not None and parent_message_id is SEEK
        if look and any(t.message_id == seek for t in buffered):
            look = False
        found = self._read(nodes_ops.readable, scope, key, (seek or "") if look else None)
        gen = found.generation
        if look and not found.stored:
            seek = None

        def start() -> ThreadWalker:
            planner = HistoryPlanner(
                system=[],
                max_tokens=max_tokens,
                max_messages=max_messages,
                count=lambda m: m.token_count,
            )
            walker = ThreadWalker(
                conversation_id=key.conversation_id,
                current_message_id=seek,
                parent_message_id=parent_message_id,
                planner=planner,
                tokenizer=tokenizer,
            )
            walker.feed(buffered)
            return walker

        walker, objects = start(), 0
        damaged: list[str] = []
        if gen is not None and not walker.done:
            consumer, objects, damaged = blobs_for(self._core).run(
                self._owned(
                    log.read_newest_first(
                        key.prefix(gen), start, skip_damaged=skip_damaged, leave_out=found.erasing
                    )
                )
            )
            assert isinstance(consumer, ThreadWalker)
            walker = consumer
        return finish(
            walker,
            current_message_id=current_message_id,
            encoding=tokenizer.name,
            objects_read=objects,
            damaged=damaged,
            resolver=resolver or self._resolver,
        )

    def clear(self) -> None:
        """Forget every turn of this node memory (buffered ones too)."""
        self._buffer.clear()
        rt, scope, key = self._core.rt, self._scope, self.key
        removed = self._write(nodes_ops.remove, rt, scope, key)
        if removed is not None:
            self._core.job_queued()

    def compact(self) -> int:
        """Fold loose objects into one now (normally a background job); returns how many."""
        scope, key = self._scope, self.key
        gen = self._read(nodes_ops.generation, scope, key)
        if gen is None:
            return 0
        compacting = self._owned(log.compact(key.prefix(gen), min_segments=1))
        absorbed = blobs_for(self._core).run(compacting)
        if absorbed:
            self._write(nodes_ops.compacted, key, gen, absorbed)
        return absorbed

    def __enter__(self) -> NodeMemory:
        return self

    def __exit__(
        self,
        exc_type: type[BaseException] | None,
        exc: BaseException | None,
        tb: TracebackType | None,
    ) -> None:
        self.flush()


class Nodes(SubAPI):
    """Node-scoped memories: a separate turn history per (app, conversation, node)."""

    def open(
        self,
        scope: Scope,
        app_id: str,
        conversation_id: str | None,
        node_id: str,
        *,
        resolver: FileResolver | None = None,
    ) -> NodeMemory:
        """A handle on one node memory (no I/O until it flushes or reads).

        The conversation must exist in ``scope``; without a conversation id this is
        a ConfigurationError (node memory works only in a chat flow).
        """
        return NodeMemory(
            self._core, scope, _key(scope, app_id, conversation_id, node_id), resolver
        )

    def add_turn(
        self, scope: Scope, app_id: str, conversation_id: str, node_id: str, **turn: Any
    ) -> Turn:
        """Add one turn and make it durable before returning; returns it as stored (a
        turn that replaces another carries its ``revision``)."""
        node = self.open(scope, app_id, conversation_id, node_id)
        added = node.add_turn(**turn)
        stored = node._flush()
        return next((t for t in stored if t.uid == added.uid), added)

    def history(
        self, scope: Scope, app_id: str, conversation_id: str, node_id: str, **options: Any
    ) -> NodeHistory:
        """See :meth:`NodeMemory.history` for the options."""
        return self.open(scope, app_id, conversation_id, node_id).history(**options)

    def delete(self, scope: Scope, app_id: str, conversation_id: str, node_id: str) -> None:
        self.open(scope, app_id, conversation_id, node_id).clear()

    def gc(
        self,
        older_than_s: float,
        *,
        dry_run: bool = False,
        tenant: str | None = None,
        progress: Callable[[int, int], None] | None = None,
    ) -> GcReport:
        """Delete node memories last written more than ``older_than_s`` seconds ago."""
        if older_than_s < 0:
            raise InvalidInput("older_than must be >= 0", field="older_than")
        rt = self._core.rt
        cutoff = rt.clock() - int(older_than_s * 1_000_000)
        rows = self._read(nodes_ops.stale, cutoff, 1_000_000, tenant)
        blobs = blobs_for(self._core)
        objects = size = 0
        for i, row in enumerate(rows):
            if dry_run:
                metas = blobs.run(log.listing(row.prefix))
                objects, size = objects + len(metas), size + sum(m.size for m in metas)
            else:
                drop = functools.partial(nodes_ops.drop_rows, rt, [row], enqueue=False)
                self._write(drop)
                n, b = blobs.run(log.purge(row.prefix))
                objects, size = objects + n, size + b
            if progress is not None:
                progress(i + 1, len(rows))
        return GcReport(len(rows), objects, size, dry_run)
