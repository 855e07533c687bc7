"""Wire model of deletion receipts."""

from __future__ import annotations

from datetime import datetime

from pydantic import Field

from memstrata.domain.receipts import Receipt
from memstrata.wire._codec import Wire

__all__ = ["RECEIPT_HEADER", "ReceiptOut"]

#: The response header a REST deletion (204, no body) names its receipt in.
RECEIPT_HEADER = "X-Memstrata-Receipt"


class ReceiptOut(Wire):
    __domain__ = Receipt

    id: str
    tenant: str
    user: str = Field(description="The user whose data was deleted (or who was deleted).")
    agent: str | None
    kind: str = Field(description="user, conversation, message or fact.")
    subject_ids: list[str] = Field(
        description="The deleted ids (never content): a user's id then its conversations'; "
        "a conversation's; a message deletion's conversation then the messages of the "
        "removed subtree; a fact's."
    )
    actor: str = Field(description="Who asked: `key <id>` over REST, `cli`, or `python`.")
    created_at: datetime
    tables: dict[str, int] = Field(description="Rows removed, per table.")
    blobs: dict[str, int] = Field(description="Objects removed, per blob prefix.")
    verified: bool | None = Field(
        description="Whether the verification scan after the deletion found nothing of it "
        "left (null: not run yet)."
    )
    verified_at: datetime | None
    findings: list[str] = Field(
        description="Where the scan found something: table and column (or blob prefix) with "
        "a count, never a value."
    )
    key_destroyed: bool = Field(
        default=False,
        description="A user deletion with encryption at rest on: the user's data key was "
        "destroyed, so earlier backups and exports of their content no longer open.",
    )
