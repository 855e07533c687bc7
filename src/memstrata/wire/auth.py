"""Wire model of ``GET /v1/me``: who an API key speaks for."""

from __future__ import annotations

from dataclasses import dataclass

from pydantic import Field

from memstrata.wire._codec import Wire

__all__ = ["Identity", "MeOut"]


@dataclass(frozen=True, slots=True)
class Identity:
    """Who the API key speaks for (``GET /v1/me``); ``user`` is None for an admin key."""

    tenant: str
    user: str | None
    agent: str | None
    admin: bool


class MeOut(Wire):
    __domain__ = Identity

    tenant: str
    user: str | None = Field(description="The key's user; null for an admin key.")
    agent: str | None = Field(description="The key's agent; null (keys name no agent).")
    admin: bool = Field(description="An admin key names the user in X-Memstrata-User.")
