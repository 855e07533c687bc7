"""Generated from ``_async_receipts.py`` by ``scripts/unasync.py``: do not edit."""

from __future__ import annotations

import httpx

from memstrata.client import _decode as decode
from memstrata.client._sync_session import Session
from memstrata.client._wire import check_tenant, segment
from memstrata.domain.receipts import Receipt
from memstrata.errors import MemstrataError
from memstrata.types import Scope
from memstrata.wire.receipts import RECEIPT_HEADER

__all__ = ["RemoteReceipts", "receipt_of"]


def receipt_of(
    session: Session, response: httpx.Response, headers: dict[str, str]
) -> Receipt:
    """The receipt a deletion's answer names (read with the headers the deletion used)."""
    rid = response.headers.get(RECEIPT_HEADER)
    if not rid:
        raise MemstrataError(
            f"the server answered a deletion without {RECEIPT_HEADER}; "
            "is it a memstrata server of this version?"
        )
    return session.get(f"/v1/receipts/{segment(rid)}", decode.receipt, headers)


class RemoteReceipts:
    """``mem.receipts`` over HTTP."""

    def __init__(self, session: Session) -> None:
        self._s = session

    def get(self, owner: Scope | str, receipt_id: str) -> Receipt:
        """A receipt, as the embedded facade reads it: a scope reads that user's receipts
        (an admin key: all of them, the user's deletion included); a tenant name (an admin
        key's own) reads any receipt of the tenant."""
        if isinstance(owner, str):
            check_tenant(self._s.identity(), owner)
            headers: dict[str, str] = {}
        else:
            headers = self._s.scoped(owner)
        return self._s.get(f"/v1/receipts/{segment(receipt_id)}", decode.receipt, headers)
