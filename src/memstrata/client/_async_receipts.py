"""``mem.receipts`` over HTTP, and how the remote deletions fetch their receipt.

``_sync_receipts.py`` is generated from this file by ``scripts/unasync.py``.
"""

from __future__ import annotations

import httpx

from memstrata.client import _decode as decode
from memstrata.client._async_session import AsyncSession
from memstrata.client._wire import check_tenant, segment
from memstrata.domain.receipts import Receipt
from memstrata.errors import MemstrataError
from memstrata.types import Scope
from memstrata.wire.receipts import RECEIPT_HEADER

__all__ = ["AsyncRemoteReceipts", "receipt_of"]


async def receipt_of(
    session: AsyncSession, response: httpx.Response, headers: dict[str, str]
) -> Receipt:
    """The receipt a deletion's answer names (read with the headers the deletion used)."""
    rid = response.headers.get(RECEIPT_HEADER)
    if not rid:
        raise MemstrataError(
            f"the server answered a deletion without {RECEIPT_HEADER}; "
            "is it a memstrata server of this version?"
        )
    return await session.get(f"/v1/receipts/{segment(rid)}", decode.receipt, headers)


class AsyncRemoteReceipts:
    """``mem.receipts`` over HTTP."""

    def __init__(self, session: AsyncSession) -> None:
        self._s = session

    async def get(self, owner: Scope | str, receipt_id: str) -> Receipt:
        """A receipt, as the embedded facade reads it: a scope reads that user's receipts
        (an admin key: all of them, the user's deletion included); a tenant name (an admin
        key's own) reads any receipt of the tenant."""
        if isinstance(owner, str):
            check_tenant(await self._s.identity(), owner)
            headers: dict[str, str] = {}
        else:
            headers = await self._s.scoped(owner)
        return await self._s.get(f"/v1/receipts/{segment(receipt_id)}", decode.receipt, headers)
