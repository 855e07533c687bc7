"""Rendering a branch for a model: OpenAI chat messages or prefixed plain text."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Protocol

from memstrata.types import FileRef, Message, Role, dump_tool_calls, file_placeholder

__all__ = ["FileResolver", "file_placeholder", "to_openai", "to_text"]


class FileResolver(Protocol):
    """Turns a stored file reference into a URL a model can fetch (``http(s):`` or ``data:``).

    Return ``None`` when the file cannot be resolved; it is then rendered as a
    text placeholder instead of being dropped silently.
    """

    def __call__(self, ref: FileRef) -> str | None: ...


def _default_resolver(ref: FileRef) -> str | None:
    return ref.url if ref.transfer_method == "remote_url" else None


def _content(message: Message, resolver: FileResolver) -> str | list[dict[str, Any]]:
    if not message.files:
        return message.content
    parts: list[dict[str, Any]] = []
    for ref in message.files:
        url = resolver(ref) if ref.type == "image" and message.role is Role.USER else None
        if url:
            # Dify sends images at high detail unless configured otherwise.
            image = {"url": url, "detail": ref.detail or "high"}
            parts.append({"type": "image_url", "image_url": image})
        else:
            parts.append({"type": "text", "text": file_placeholder(ref)})
    if message.content:
        parts.append({"type": "text", "text": message.content})
    if message.role is not Role.USER:
        # Only user messages take image parts; others get one flat string.
        return "\n".join(p["text"] for p in parts)
    return parts


def to_openai(
    messages: Sequence[Message], resolver: FileResolver | None = None
) -> list[dict[str, Any]]:
    """OpenAI chat-completion messages, without ids.

    Files become content parts: images the resolver can locate become
    ``image_url`` parts, every other file a text placeholder. Tool calls and
    their results keep their OpenAI shape.
    """
    resolve = resolver or _default_resolver
    out: list[dict[str, Any]] = []
    for m in messages:
        item: dict[str, Any] = {"role": m.role.value, "content": _content(m, resolve)}
        if m.tool_calls:
            item["tool_calls"] = dump_tool_calls(m.tool_calls)
            if not item["content"]:
                item["content"] = None
        if m.role is Role.TOOL:
            item["tool_call_id"] = m.tool_call_id
        out.append(item)
    return out


def to_text(
    messages: Sequence[Message], *, human_prefix: str = "Human", ai_prefix: str = "Assistant"
) -> str:
    """``Human: ...`` / ``Assistant: ...`` lines; images appear as ``[image]``.

    System and tool messages are left out, as completion-style prompts carry
    them elsewhere.
    """
    lines: list[str] = []
    for m in messages:
        if m.role is Role.USER:
            prefix = human_prefix
        elif m.role is Role.ASSISTANT:
            prefix = ai_prefix
        else:
            continue
        pieces = [file_placeholder(f) for f in m.files]
        if m.content:
            pieces.append(m.content)
        lines.append(f"{prefix}: {' '.join(pieces)}".rstrip())
    return "\n".join(lines)
