"""Redaction of configured patterns before text reaches a model or the long-term store.

``MEMSTRATA_REDACT`` names built-in kinds (``email``, ``phone``, ``secret``: API keys,
bearer tokens, long hex or base64 secrets) and ``MEMSTRATA_REDACT_PATTERNS`` adds
regular expressions of your own. A match becomes ``[redacted:<kind>]``. It is applied
to every message sent to the LLM (compaction, extraction) and to what extraction would
store (facts, profile sections), so a fact can never carry what the model was not shown.
The raw messages themselves are stored as written: they are the user's record.
"""

from __future__ import annotations

import re
from collections.abc import Iterable, Sequence
from dataclasses import dataclass

from memstrata.errors import ConfigurationError
from memstrata.llm import LLM, ChatMessage

__all__ = ["BUILTINS", "RedactingLLM", "Redactor"]

BUILTINS: dict[str, str] = {
    "email": r"[A-Za-z0-9._%+\-]+@[A-Za-z0-9.\-]+\.[A-Za-z]{2,}",
    # International or national numbers with at least 8 digits, spaced or not.
    "phone": r"(?<![\w+])\+?\d(?:[\s.\-()]*\d){7,14}(?!\w)",
    "secret": (
        r"(?:\b(?:sk|pk|rk|msk|ghp|gho|xox[abp])[-_][A-Za-z0-9_\-]{16,}"
        r"|\bBearer\s+[A-Za-z0-9._\-]{16,}"
        r"|\b[0-9a-fA-F]{32,}\b"
        r"|\bAKIA[0-9A-Z]{16}\b)"
    ),
}


@dataclass(frozen=True, slots=True)
class Redactor:
    rules: tuple[tuple[str, re.Pattern[str]], ...]

    @classmethod
    def build(cls, kinds: Iterable[str], patterns: Sequence[str] = ()) -> Redactor | None:
        """None when nothing is configured (the common case costs nothing)."""
        rules: list[tuple[str, re.Pattern[str]]] = []
        for kind in kinds:
            if kind not in BUILTINS:
                raise ConfigurationError(
                    f"unknown redaction kind {kind!r}: choose from {', '.join(BUILTINS)}"
                )
            rules.append((kind, re.compile(BUILTINS[kind])))
        for i, pattern in enumerate(patterns):
            try:
                rules.append((f"pattern{i + 1}", re.compile(pattern)))
            except re.error as exc:
                raise ConfigurationError(f"MEMSTRATA_REDACT_PATTERNS[{i}]: {exc}") from None
        return cls(tuple(rules)) if rules else None

    def __call__(self, text: str) -> str:
        for kind, rule in self.rules:
            text = rule.sub(f"[redacted:{kind}]", text)
        return text


class RedactingLLM:
    """An :class:`~memstrata.llm.LLM` that redacts every message before sending it."""

    def __init__(self, inner: LLM, redactor: Redactor) -> None:
        self.inner = inner
        self._redact = redactor

    def _clean(self, messages: Sequence[ChatMessage]) -> list[ChatMessage]:
        out: list[ChatMessage] = []
        for m in messages:
            content = m.get("content")
            out.append({**m, "content": self._redact(content)} if isinstance(content, str) else m)
        return out

    def complete(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str | None = None,
        purpose: str | None = None,
    ) -> str:
        return self.inner.complete(self._clean(messages), model=model, purpose=purpose)

    async def acomplete(
        self,
        messages: Sequence[ChatMessage],
        *,
        model: str | None = None,
        purpose: str | None = None,
    ) -> str:
        return await self.inner.acomplete(self._clean(messages), model=model, purpose=purpose)
