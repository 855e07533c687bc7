"""``/v1/receipts/{rid}``: the receipt of a deletion (see :mod:`memstrata.receipts`).

REST deletions answer 204 with no body, so they name their receipt in the
``X-Memstrata-Receipt`` header; :func:`deleted` builds that answer for every delete route.
"""

from __future__ import annotations

from typing import Annotated, Any

from fastapi import APIRouter, Depends, Header, Response

from memstrata.errors import Forbidden, InvalidInput
from memstrata.receipts import Receipt
from memstrata.server.auth import AGENT_HEADER, USER_HEADER, Mem, principal
from memstrata.server.responses import JSONResponse
from memstrata.storage.tenancy import Principal
from memstrata.types import Scope
from memstrata.wire.receipts import RECEIPT_HEADER, ReceiptOut

__all__ = ["DELETED", "RECEIPT_HEADER", "Caller", "actor", "deleted", "router"]

router = APIRouter(prefix="/v1/receipts", tags=["receipts"])

#: The key behind a request (any role), for the receipt's actor.
Caller = Annotated[Principal, Depends(principal)]

#: How the delete routes document their 204 in OpenAPI: the receipt's header.
DELETED: dict[int | str, dict[str, Any]] = {
    204: {
        "description": "Deleted; the receipt's id is in the X-Memstrata-Receipt header.",
        "headers": {
            RECEIPT_HEADER: {
                "description": "The deletion's receipt (`GET /v1/receipts/{rid}`).",
                "schema": {"type": "string"},
            }
        },
    }
}


def actor(caller: Principal) -> str:
    """A receipt's actor for a REST deletion: the key that asked (its id, never its secret)."""
    return f"key {caller.key_id}"


def deleted(receipt: Receipt) -> Response:
    """The 204 of a deletion, naming its receipt."""
    return Response(status_code=204, headers={RECEIPT_HEADER: receipt.id})


@router.get(
    "/{rid}",
    response_model=ReceiptOut,
    responses={404: {"description": "No such receipt for this key."}},
    summary="What a deletion removed, and what the verification scan after it found",
    description=(
        "Counts per table and per blob prefix, the deleted ids (never content), when and by "
        "which key, and whether the scan of every table (and the node memory blobs) after "
        "the deletion found anything of it left. A user key reads the receipts of its own "
        "deletions (not its user's deletion); an admin key reads any receipt of its tenant, "
        "or, naming a user, that user's (the user's deletion included). 404 otherwise."
    ),
)
async def get_receipt(
    mem: Mem,
    caller: Caller,
    rid: str,
    user: Annotated[
        str | None,
        Header(alias=USER_HEADER, description="Admin keys only: that user's receipts."),
    ] = None,
    agent: Annotated[
        str | None,
        Header(
            alias=AGENT_HEADER,
            description="Admin keys naming a user: only that agent's receipts.",
        ),
    ] = None,
) -> Response:
    if not caller.admin:
        if user is not None or agent is not None:
            raise Forbidden(
                f"a user key always acts as its own user; it may not send {USER_HEADER} "
                f"or {AGENT_HEADER}"
            )
        assert caller.user is not None  # a non-admin key always names its user
        receipt = await mem.receipts.get(Scope(caller.tenant, caller.user), rid)
    elif user is None:
        if agent is not None:
            raise InvalidInput(f"{AGENT_HEADER} needs {USER_HEADER}", field=AGENT_HEADER)
        receipt = await mem.receipts.get(caller.tenant, rid)
    else:
        receipt = await mem.receipts.get(Scope(caller.tenant, user, agent), rid, admin=True)
    return JSONResponse(ReceiptOut.encode(receipt))
