"""Branch truth across conversations: recall returns a message of another conversation
only when it lies on that conversation's active branch (an answer regenerated away, a
question edited away and what hangs under them stay out), as the conversation being
answered keeps only the ancestors of its leaf (:class:`~memstrata.recall.search.BranchRule`).

The check is batched for cost: the candidates already carry their ancestry labels, so
one recursive query walks the forks of every candidate's conversation from its active
leaf (one narrow row per fork, none per message, and only as far up as the shallowest
candidate), then each candidate is judged in O(1) (:meth:`Branch.contains`). A
conversation with no fork costs one row. :class:`ActiveBranches` keeps what it read, so
the neighbours of a search's hits are judged without walking again.
"""

from __future__ import annotations

from collections.abc import Iterable
from dataclasses import dataclass, field

from memstrata.conversation.branches import Branch, active_branches
from memstrata.storage.plan import Op
from memstrata.types import Message

__all__ = ["ActiveBranches"]


@dataclass(slots=True)
class ActiveBranches:
    """Judges messages against their conversation's active branch, reading each
    conversation's branch once (per read transaction: make one per search).

    ``skip`` names the conversation the caller judges by its own rule (the one being
    answered, against the leaf it answers); its messages always pass here.
    """

    skip: str | None = None
    _branches: dict[str, Branch | None] = field(default_factory=dict)
    #: The depth each conversation's branch was read up to (a shallower message needs more).
    _read_to: dict[str, int] = field(default_factory=dict)

    def load(self, messages: Iterable[Message]) -> Op[None]:
        """Read the active branches the given messages need (one walk for all of them)."""
        need: dict[str, int] = {}
        for m in messages:
            cid = m.conversation_id
            if cid == self.skip:
                continue
            if cid in self._read_to and self._read_to[cid] <= m.depth:
                continue
            need[cid] = min(need.get(cid, m.depth), m.depth)
        if not need:
            return
        floor = min(need.values())
        found = yield from active_branches(sorted(need), floor)
        for cid in need:
            self._branches[cid] = found.get(cid)
            self._read_to[cid] = floor

    def keeps(self, message: Message, chain_id: str | None) -> bool:
        """Whether ``message`` (with its ancestry label) is on its conversation's active
        branch; a conversation with no branch to judge by (no active leaf, unlabelled)
        keeps its messages. Call :meth:`load` with it first."""
        if message.conversation_id == self.skip:
            return True
        branch = self._branches.get(message.conversation_id)
        return branch is None or branch.contains(chain_id, message.depth)
