"""Window sizes: each model's context window (a small table) and the recent window's default."""

from __future__ import annotations

__all__ = ["DEFAULT_WINDOW", "context_window"]

DEFAULT_WINDOW = 20  # n8n's lastMessages: messages a compaction leaves out of the summary
_DEFAULT_CONTEXT_WINDOW = 128_000
# Longest prefix wins (model names lowercased, any "org/" prefix removed).
_CONTEXT_WINDOWS: tuple[tuple[str, int], ...] = (
    ("gpt-4o", 128_000),
    ("gpt-4.1", 1_047_576),
    ("gpt-4-turbo", 128_000),
    ("gpt-4", 8_192),
    ("gpt-3.5-turbo", 16_385),
    ("gpt-5", 400_000),
    ("o1", 200_000),
    ("o3", 200_000),
    ("o4", 200_000),
    ("claude", 200_000),
    ("gemini-1.5", 1_048_576),
    ("gemini-2", 1_048_576),
    ("llama-3", 128_000),
    ("mistral-large", 128_000),
)


def context_window(model: str | None) -> int:
    """The model's context window from a small table (prefix match), else 128k."""
    if not model:
        return _DEFAULT_CONTEXT_WINDOW
    name = model.strip().lower().rsplit("/", 1)[-1]
    best = ("", _DEFAULT_CONTEXT_WINDOW)
    for prefix, size in _CONTEXT_WINDOWS:
        if name.startswith(prefix) and len(prefix) > len(best[0]):
            best = (prefix, size)
    return best[1]
