"""Where a new message sits in the tree (pure)."""

from __future__ import annotations

from dataclasses import dataclass

from memstrata.types import Message, Role

__all__ = ["Placement", "place"]


@dataclass(frozen=True, slots=True)
class Placement:
    depth: int
    branch_tokens: int
    system_tail_id: str | None


def place(
    parent: Message | None, parent_tail: str | None, new_id: str, role: Role, tokens: int
) -> Placement:
    """Depth, cumulative branch tokens and the last leading system message of the branch.

    ``system_tail_id`` names the deepest message of the branch's run of leading
    system messages, so history fetches that run without walking to the root.
    """
    if parent is None:
        return Placement(0, tokens, new_id if role is Role.SYSTEM else None)
    tail = new_id if parent_tail == parent.id and role is Role.SYSTEM else parent_tail
    return Placement(parent.depth + 1, parent.branch_tokens + tokens, tail)
