"""Wire models of recall search."""

from __future__ import annotations

from typing import Annotated, Any

from pydantic import BaseModel

from memstrata.recall.service import RecallHit
from memstrata.wire._codec import Via, Wire
from memstrata.wire.conversations import MessageOut

__all__ = ["HitOut", "SearchOut"]


class HitOut(Wire):
    __domain__ = RecallHit

    # A whole message; published as an object, so the schema keeps saying so.
    message: Annotated[dict[str, Any], Via(MessageOut)]
    conversation_id: str
    score: float
    provenance: list[str]
    neighbour_of: str | None = None


class SearchOut(BaseModel):
    hits: list[HitOut]
