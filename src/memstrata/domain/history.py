"""The result of ``history()`` and the checks of its limits."""

from __future__ import annotations

from dataclasses import dataclass, field
from typing import Any

from memstrata.domain.render import to_openai, to_text
from memstrata.encoding import to_json
from memstrata.errors import InvalidInput
from memstrata.types import Message

__all__ = ["History", "check_limits"]


def check_limits(max_tokens: int | None, max_messages: int | None) -> None:
    """The shared validation of history limits (None: no limit of that kind)."""
    if max_tokens is not None and (isinstance(max_tokens, bool) or not isinstance(max_tokens, int)):
        raise InvalidInput("max_tokens must be an integer or None", field="max_tokens")
    if max_tokens is not None and max_tokens < 0:
        raise InvalidInput("max_tokens must be >= 0", field="max_tokens")
    if max_messages is not None and (
        isinstance(max_messages, bool) or not isinstance(max_messages, int)
    ):
        raise InvalidInput("max_messages must be an integer or None", field="max_messages")
    if max_messages is not None and max_messages < 1:
        raise InvalidInput("max_messages must be >= 1", field="max_messages")


@dataclass(frozen=True, slots=True)
class History:
    """The result of ``history()``: messages oldest first plus what was cut."""

    leaf_id: str | None
    messages: list[Message]
    tokens: int
    truncated: bool
    over_budget: bool
    encoding: str
    rows_read: int = field(default=0, compare=False)

    def to_openai(self, resolver: Any = None) -> list[dict[str, Any]]:
        """OpenAI chat-completion messages (no ids); see :mod:`memstrata.domain.render`."""
        return to_openai(self.messages, resolver)

    def to_text(self, human_prefix: str = "Human", ai_prefix: str = "Assistant") -> str:
        """Plain text with role prefixes, for completion models."""
        return to_text(self.messages, human_prefix=human_prefix, ai_prefix=ai_prefix)

    def to_dict(self) -> dict[str, Any]:
        return to_json(self)
