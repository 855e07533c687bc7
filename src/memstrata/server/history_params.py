"""Query parameters shared by the history routes (conversation and node memory)."""

from __future__ import annotations

from typing import Annotated

from fastapi import Query

__all__ = ["DEFAULT_MAX_MESSAGES", "DEFAULT_MAX_TOKENS", "MaxMessages", "message_cap"]

#: The history routes' defaults (the hot lane answers with the same).
DEFAULT_MAX_TOKENS = 2000
DEFAULT_MAX_MESSAGES = "500"

MaxMessages = Annotated[
    str,
    Query(
        pattern=r"^([1-9][0-9]{0,12}|none)$",
        description="At most this many messages (default 500); `none` lifts the cap "
        "(Dify's `message_limit=None`).",
    ),
]


def message_cap(value: str) -> int | None:
    """``none`` is no cap; otherwise the integer the pattern admitted."""
    return None if value == "none" else int(value)
