"""The receipt of one deletion."""

from __future__ import annotations

from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from memstrata.encoding import to_json

__all__ = ["KINDS", "Receipt", "UserDeleted"]

#: What can be deleted with a receipt.
KINDS = ("user", "conversation", "message", "fact")


@dataclass(frozen=True, slots=True)
class Receipt:
    """What one deletion removed and what the scan after it found.

    ``subject_ids`` are the deleted things' ids (the user, its conversations; a
    conversation; the messages of a deleted subtree; a fact); ``tables`` counts the rows
    removed per table and ``blobs`` the objects removed per blob prefix. ``verified`` is
    None while the scan has not run, then whether it found nothing left; ``findings``
    says where it found something (table, column and row counts; never a value).
    ``key_destroyed``: a user deletion destroyed the user's data key (encryption at rest),
    so what earlier backups hold of the user no longer opens.
    """

    id: str
    tenant: str
    user: str
    agent: str | None
    kind: str
    subject_ids: list[str]
    actor: str
    created_at: datetime
    tables: dict[str, int]
    blobs: dict[str, int]
    verified: bool | None = None
    verified_at: datetime | None = None
    findings: list[str] = field(default_factory=list)
    key_destroyed: bool = False

    @property
    def rows(self) -> int:
        """Rows removed, all tables together."""
        return sum(self.tables.values())

    def to_dict(self) -> dict[str, Any]:
        """The REST shape."""
        return to_json(self)


class UserDeleted(int):
    """What ``mem.users.delete`` returns: the number of conversations removed (as before),
    carrying the deletion's :class:`Receipt` as ``.receipt``."""

    receipt: Receipt

    def __new__(cls, conversations: int, receipt: Receipt) -> UserDeleted:
        obj = super().__new__(cls, conversations)
        obj.receipt = receipt
        return obj
