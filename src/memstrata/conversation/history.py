"""Token-budgeted history of one branch (pure selection logic).

Rules (Dify's TokenBufferMemory, with its known bugs fixed):

* the branch is the path from the leaf to the root, returned oldest first;
* pending messages (a reply still streaming) are left out;
* the run of leading system messages is always kept and counted;
* the rest is cut into turns: a user message and everything after it up to the
  next user message; messages before the first user message form one turn;
* whole turns are dropped, oldest first, until the budget holds, so an assistant
  or tool message never loses the user message it answers (Dify #37490);
* the newest turn is always kept, even over budget, and then ``over_budget`` is set.

The planner is fed the branch newest first, a chunk at a time, and says when it
has seen enough, so a caller reads only about as many rows as it returns.
"""

from __future__ import annotations

from collections.abc import Callable, Iterable

from memstrata.domain.history import History, check_limits
from memstrata.types import Message, Role, Status

__all__ = [
    "NO_MESSAGE_CAP",
    "QUICK_HISTORY_ROWS",
    "History",
    "HistoryPlanner",
    "check_limits",
    "stored_tokens",
]

#: What ``max_messages=None`` stands for: more messages than any branch holds.
NO_MESSAGE_CAP = 1 << 40
#: The largest ``max_messages`` of a history read run as a quick read (``Plan.quick``):
#: the walk then reads at most this many rows and a few more.
QUICK_HISTORY_ROWS = 500


def stored_tokens(message: Message) -> int:
    """A message's tokens in the store's encoding (stored at append): the planner's
    ``count`` when history counts in that encoding."""
    return message.token_count


def _starts(message: Message) -> int:
    """Where the message starts on its branch, in cumulative stored tokens."""
    return message.branch_tokens - message.token_count


class HistoryPlanner:
    """Chooses the turns to keep while the branch is read newest first.

    ``system`` is the leading run of system messages (oldest first); the body of
    the branch starts at depth ``len(system)``. ``max_tokens`` or ``max_messages``
    of ``None`` means no limit of that kind.
    """

    def __init__(
        self,
        *,
        system: list[Message],
        max_tokens: int | None,
        max_messages: int | None,
        count: Callable[[Message], int],
        from_position: int | None = None,
    ) -> None:
        self._count = count
        # Turns starting before this point of the branch (its cumulative stored tokens) are
        # left out whole, once a turn is kept: a window that advances in steps.
        self._from = from_position
        self._system = system
        self._floor = len(system)
        self._max_tokens = max_tokens
        # None: no message cap (Dify's ``message_limit=None`` without its silent 500).
        self._max_messages = NO_MESSAGE_CAP if max_messages is None else max_messages
        self._used = sum(count(m) for m in system)
        self._kept: list[Message] = []  # newest first
        self._turn: list[Message] = []  # current partial turn, newest first
        self._turn_tokens = 0
        self.done = False
        self.truncated = False

    def feed(self, chunk: Iterable[Message]) -> bool:
        """Take the next older messages of the branch; True once nothing more is needed."""
        if self.done:
            return True
        # This loop runs for every row a history reads: the state lives in locals while it
        # runs (written back below) and closing a turn is written out in place; each step
        # is _close_turn's and _fits' own rule.
        count, floor, start, user, pending = (
            self._count,
            self._floor,
            self._from,
            Role.USER,
            Status.PENDING,
        )
        stored = count is stored_tokens
        max_tokens, max_messages = self._max_tokens, self._max_messages
        kept, turn, used, turn_tokens = self._kept, self._turn, self._used, self._turn_tokens
        reached_floor = False
        for message in chunk:
            if message.depth < floor:
                reached_floor = True
                break
            if message.status is pending:
                continue
            if start is not None and kept and _starts(message) < start:
                turn, turn_tokens = [], 0  # its user message is before the step
                self.truncated = self.done = True
                break
            turn.append(message)
            turn_tokens += message.token_count if stored else count(message)
            if message.role is user:
                closing = True
            elif kept:
                # Older messages only add to the open turn: once it cannot fit, stop reading.
                closing = False
            else:
                continue
            fits = len(kept) + len(turn) <= max_messages and (
                max_tokens is None or used + turn_tokens <= max_tokens
            )
            if fits:
                if closing:
                    kept.extend(turn)
                    used += turn_tokens
                    turn, turn_tokens = [], 0
                continue
            if closing and not kept:  # the newest turn is kept whatever it costs
                kept.extend(turn)
                used += turn_tokens
            else:
                self.truncated = self.done = True
            turn, turn_tokens = [], 0
            if self.done:
                break
        self._turn, self._used, self._turn_tokens = turn, used, turn_tokens
        if reached_floor:
            self.finish()
        return self.done

    @property
    def kept_any(self) -> bool:
        """Whether a whole turn is kept (the newest turn is kept whatever it costs)."""
        return bool(self._kept)

    @property
    def tokens_left(self) -> int | None:
        """Tokens left after the system run, the kept turns and the open turn (None: no limit)."""
        if self._max_tokens is None:
            return None
        return self._max_tokens - self._used - self._turn_tokens

    @property
    def messages_left(self) -> int:
        return self._max_messages - len(self._kept) - len(self._turn)

    def _fits(self) -> bool:
        fits = self._max_tokens is None or self._used + self._turn_tokens <= self._max_tokens
        return fits and len(self._kept) + len(self._turn) <= self._max_messages

    def finish(self) -> None:
        """The walk reached the root (or the system run): the open turn is the oldest."""
        if not self.done:
            self._close_turn()
            self.done = True

    def _close_turn(self) -> None:
        if not self._turn:
            return
        if self._fits() or not self._kept:
            self._kept.extend(self._turn)
            self._used += self._turn_tokens
        else:
            self.truncated = True
            self.done = True
        self._turn = []
        self._turn_tokens = 0

    def result(self, leaf_id: str | None, encoding: str, rows_read: int) -> History:
        messages = self._system + self._kept[::-1]
        # Either limit can be broken, and only by the newest turn, which is always kept.
        over = self._max_tokens is not None and self._used > self._max_tokens
        over = over or len(self._kept) > self._max_messages
        return History(
            leaf_id=leaf_id,
            messages=messages,
            tokens=self._used,
            truncated=self.truncated,
            over_budget=over,
            encoding=encoding,
            rows_read=rows_read,
        )
