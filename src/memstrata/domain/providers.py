"""A context's OpenAI chat messages in other providers' request shapes (pure).

Anthropic's Messages API takes the system prompt apart (``system``, a list of text
blocks) and only ``user`` and ``assistant`` turns; it caches the prompt up to a block
marked ``cache_control: {"type": "ephemeral"}``. The leading system messages become
the ``system`` blocks; an injected block later in the context (recall, working
memory, ...) becomes user text, since that API has no system turn mid-conversation;
tool calls and results become ``tool_use`` and ``tool_result`` blocks; and consecutive
turns of one role are merged, as that API expects turns to alternate.
"""

from __future__ import annotations

import json
from collections.abc import Sequence
from typing import Any

__all__ = ["CACHE_MARK", "to_anthropic"]

CACHE_MARK: dict[str, str] = {"type": "ephemeral"}


def _text(text: Any) -> list[dict[str, Any]]:
    # Anthropic refuses empty text blocks.
    return [{"type": "text", "text": text}] if isinstance(text, str) and text else []


def _image(url: str) -> dict[str, Any]:
    if url.startswith("data:") and ";base64," in url:
        media, data = url[5:].split(";base64,", 1)
        return {"type": "image", "source": {"type": "base64", "media_type": media, "data": data}}
    return {"type": "image", "source": {"type": "url", "url": url}}


def _content(content: Any) -> list[dict[str, Any]]:
    if not isinstance(content, list):
        return _text(content)
    blocks: list[dict[str, Any]] = []
    for part in content:
        if part.get("type") == "image_url":
            blocks.append(_image(str(part["image_url"]["url"])))
        else:
            blocks += _text(part.get("text"))
    return blocks


def _arguments(text: str) -> Any:
    try:
        return json.loads(text) if text else {}
    except ValueError:
        return {"arguments": text}  # not JSON: passed on as it was written


def _turn(message: dict[str, Any]) -> tuple[str, list[dict[str, Any]]]:
    role = message.get("role")
    if role == "tool":
        text = message.get("content")
        result: dict[str, Any] = {"type": "tool_result", "tool_use_id": message["tool_call_id"]}
        if isinstance(text, str) and text:
            result["content"] = text
        return "user", [result]
    blocks = _content(message.get("content"))
    if role == "assistant":
        for call in message.get("tool_calls") or ():
            fn = call["function"]
            blocks.append(
                {
                    "type": "tool_use",
                    "id": call["id"],
                    "name": fn["name"],
                    "input": _arguments(fn.get("arguments", "")),
                }
            )
        return "assistant", blocks
    return "user", blocks  # user turns, and system blocks after the conversation began


def to_anthropic(messages: Sequence[dict[str, Any]], breakpoint: int | None) -> dict[str, Any]:
    """``{"system": [blocks], "messages": [turns]}``; the block that ends message
    ``breakpoint`` (or the nearest earlier one, if that message has no block) carries
    the cache marker."""
    system: list[dict[str, Any]] = []
    turns: list[dict[str, Any]] = []
    marked: dict[str, Any] | None = None
    lead = True
    for i, message in enumerate(messages):
        if lead and message.get("role") == "system":
            blocks = _text(message.get("content"))
            system += blocks
        else:
            lead = False
            role, blocks = _turn(message)
            if turns and turns[-1]["role"] == role:
                turns[-1]["content"] += blocks
            elif blocks:
                turns.append({"role": role, "content": blocks})
        if breakpoint is not None and i <= breakpoint and blocks:
            marked = blocks[-1]
    if marked is not None:
        marked["cache_control"] = dict(CACHE_MARK)
    return {"system": system, "messages": turns}
