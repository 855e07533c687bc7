"""Stored things shown to people: times, one-line cells and transcripts."""

from __future__ import annotations

from collections.abc import Sequence
from datetime import datetime

from rich.text import Text

from memstrata.domain.render import file_placeholder
from memstrata.types import Message, Status

__all__ = ["short", "transcript", "when"]


def when(moment: datetime) -> str:
    return moment.strftime("%Y-%m-%d %H:%M:%S")


def short(text: str, width: int = 80) -> Text:
    """One line of user text for a table cell; a Text so brackets are not read as markup."""
    line = " ".join(text.split())
    return Text(line if len(line) <= width else line[: width - 1] + "…")


def transcript(messages: Sequence[Message]) -> str:
    """``role: content`` lines, oldest first, every role included (unlike ``to_text``, which
    keeps only the two chat roles for completion prompts); continuation lines are indented
    so each message still starts at the margin."""
    out: list[str] = []
    for m in messages:
        pieces = [file_placeholder(f) for f in m.files]
        if m.content:
            pieces.append(m.content)
        pieces += [f"[calls {c.function.name}]" for c in m.tool_calls]
        if m.status is Status.PENDING and not pieces:
            pieces.append("(pending)")
        role = m.role.value + (f" ({m.tool_call_id})" if m.tool_call_id else "")
        body = " ".join(pieces).replace("\n", "\n  ")
        out.append(f"{role}: {body}".rstrip())
    return "\n".join(out)
