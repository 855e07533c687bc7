"""Thread extraction and whole-turn truncation of a node's turns.

Turns arrive newest first (:func:`memstrata.nodes.log.read_newest_first`). The
thread is walked by parent ids from the current message, as Dify's
``extract_thread_messages`` does: a turn whose message is the one looked for is
taken, and then its parent is looked for; turns of other branches are skipped;
an empty parent ends the thread; the all-zero legacy parent accepts every older
turn in arrival order. Several turns of one message (a node in a loop) are all
taken. The kept turns go through the conversation history's
:class:`~memstrata.conversation.history.HistoryPlanner`, so truncation drops
whole turns, oldest first, with the same token counting and the same
"newest turn always kept, then over_budget" rule.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import UTC, datetime
from typing import Any

from memstrata.conversation.history import HistoryPlanner
from memstrata.domain.nodes import NodeHistory, NodeTurn
from memstrata.ids import UUID_NIL
from memstrata.nodes.layout import Turn
from memstrata.tokens import Tokenizer
from memstrata.types import FileRef, Message, Role, Status

__all__ = ["NodeHistory", "ThreadWalker", "turn_messages"]

_SEEK = object()  # the current message's own turn has not been met yet
_ROOT = object()  # the thread's root was taken: only turns of the same message follow

FileResolver = Callable[[FileRef], Any]


def _message(turn: Turn, role: Role, conversation_id: str, tokenizer: Tokenizer) -> Message:
    when = datetime.fromtimestamp(turn.created_at / 1_000_000, tz=UTC)
    user = role is Role.USER
    content = turn.user_content if user else turn.assistant_content
    files = turn.user_files if user else turn.assistant_files
    return Message(
        id=turn.message_id,
        conversation_id=conversation_id,
        parent_id=turn.parent_message_id if user else turn.message_id,
        role=role,
        content=content,
        files=files,
        tool_calls=(),
        tool_call_id=None,
        status=Status.COMPLETE,
        metadata={"turn": turn.uid},
        occurred_at=when,
        created_at=when,
        seq=0,
        depth=1,
        token_count=tokenizer.count_message(content, (), files),
        branch_tokens=0,
    )


def turn_messages(turn: Turn, conversation_id: str, tokenizer: Tokenizer) -> list[Message]:
    """A turn as messages, newest first (an empty answer is left out)."""
    out = []
    if turn.assistant_content or turn.assistant_files:
        out.append(_message(turn, Role.ASSISTANT, conversation_id, tokenizer))
    out.append(_message(turn, Role.USER, conversation_id, tokenizer))
    return out


class ThreadWalker:
    """Consumes turns newest first: picks the thread, feeds the planner, says when done."""

    def __init__(
        self,
        *,
        conversation_id: str,
        current_message_id: str | None,
        parent_message_id: str | object | None,
        planner: HistoryPlanner,
        tokenizer: Tokenizer,
    ) -> None:
        self._cid = conversation_id
        self._tokenizer = tokenizer
        self.planner = planner
        self.turns: list[Turn] = []  # kept by the thread walk, newest first
        self._current: str | None = current_message_id
        # What to look for next: a message id, UUID_NIL (everything), _SEEK or _ROOT.
        self._next: str | object | None
        if parent_message_id is not _SEEK:
            self._next = _ROOT if parent_message_id is None else parent_message_id
        elif current_message_id is not None:
            self._next = _SEEK
        else:
            self._next = None  # no current message: the newest turn starts the thread
        self.done = False

    def _accept(self, turn: Turn) -> bool:
        nxt = self._next
        if self._current is not None and turn.message_id == self._current:
            if nxt is _SEEK:
                self._next = turn.parent_message_id or _ROOT
            return True
        if nxt is None or nxt == UUID_NIL or (isinstance(nxt, str) and turn.message_id == nxt):
            self._current = turn.message_id
            self._next = turn.parent_message_id or _ROOT
            return True
        if nxt is _ROOT:
            self.done = True  # past the root's own turns: nothing older belongs
        return False

    def feed(self, turns: list[Turn]) -> bool:
        for turn in turns:
            if self.done:
                break
            if not self._accept(turn):
                continue
            self.turns.append(turn)
            if self.planner.feed(turn_messages(turn, self._cid, self._tokenizer)):
                self.done = True
        return self.done


SEEK = _SEEK


def finish(
    walker: ThreadWalker,
    *,
    current_message_id: str | None,
    encoding: str,
    objects_read: int,
    damaged: list[str],
    resolver: FileResolver | None,
) -> NodeHistory:
    walker.planner.finish()
    history = walker.planner.result(current_message_id, encoding, objects_read)
    kept = {m.metadata["turn"] for m in history.messages}
    resolve = resolver or (lambda ref: ref)
    turns = [
        NodeTurn(t, [resolve(f) for f in t.user_files], [resolve(f) for f in t.assistant_files])
        for t in reversed(walker.turns)
        if t.uid in kept
    ]
    return NodeHistory(current_message_id, history, turns, objects_read, damaged)
