"""The extraction prompt: what the model is asked, and how it is asked to try again.

The output is a plain list of chat messages, so any chat model can run it and the same
inputs always give the same bytes (tests pin it, prompt caches reuse it). Everything
that comes from users or earlier extractions is HTML-escaped: a conversation that
contains ``</conversation>`` must not be able to close the block it sits in.
Facts are shown under short aliases (``f1``, ...) that the answer refers back to.
"""

from __future__ import annotations

import html
from collections.abc import Sequence
from datetime import UTC, date

from memstrata.longterm.inject import confidence_text
from memstrata.longterm.model import (
    CATEGORIES,
    PROFILE_SECTIONS,
    MemoryState,
    PromptFact,
    Signal,
    Turn,
)

__all__ = [
    "RAW_ECHO_LIMIT",
    "TRUNCATE_AT",
    "build_messages",
    "format_conversation",
    "repair_messages",
]

#: Turns longer than this are shown as their head and tail only.
TRUNCATE_AT = 1000
_KEEP = 500
_CUT = "\n...[truncated]...\n"

#: How much of a rejected answer is echoed back in a retry.
RAW_ECHO_LIMIT = 4000

_SYSTEM = f"""\
You maintain the long-term memory of one user of an AI assistant. You read a new \
conversation between the user and the assistant, compare it with what is already \
remembered, and propose changes.

What to remember:
- Only durable facts about the user: who they are, how they work, what they prefer, \
know, aim for, and what the assistant should do differently. Nothing that matters only \
for the task at hand or only for a short while.
- Never record file uploads or the files of a conversation.
- Facts marked [MANUAL] were written by the user. Leave them alone unless the \
conversation clearly contradicts them.

Each new fact has:
- "content": one self-contained statement about the user.
- "category": one of {", ".join(CATEGORIES)}.
- "confidence": 0.9-1.0 when the user said it explicitly, 0.7-0.8 when it is strongly \
implied, 0.5-0.6 when it is inferred.
- "sourceError" (only for category "correction"): what the assistant did wrong.
- "validFrom" and "validTo" (optional, ISO dates such as "2024-03" or "2024-03-05"): \
when the fact became and stopped being true, only when the conversation says so \
("since March", "until Friday"). Each turn starts with the time it was said; read \
relative dates against it.

Remembered facts are listed as "- [alias | category | confidence] content"; refer to \
them by their alias (f1, f2, ...). When the conversation contradicts a remembered \
fact, do not edit it: add a new fact \
with "supersedes" listing the aliases of the facts it replaces and a "reason". Use \
"factsToRemove" only for facts that are wrong or obsolete and have no replacement, \
always with a reason.

The profile has the sections {", ".join(PROFILE_SECTIONS)}. Include a section only \
when it should change, with its complete new text: a few sentences.

Return ONLY a JSON object, no other text, with this shape:
{{"profile": {{"workContext": "the new text of a section that changes"}},
 "newFacts": [{{"content": "...", "category": "preference", "confidence": 0.9, \
"supersedes": ["f1"], "reason": "...", "sourceError": "...", "validFrom": "2024-03"}}],
 "factsToRemove": [{{"id": "f2", "reason": "..."}}]}}
Leave out "supersedes", "reason", "sourceError", "validFrom" and "validTo" when they do \
not apply. Use empty \
lists and an empty profile when nothing should change."""

_HINTS: dict[Signal, str] = {
    Signal.CORRECTION: (
        "IMPORTANT: the user corrected the assistant in this conversation. Record what "
        'was wrong as a fact with category "correction", and put the mistaken approach '
        'in "sourceError".'
    ),
    Signal.REINFORCEMENT: (
        "IMPORTANT: the user confirmed that an approach of the assistant was right. "
        'That approach is worth remembering as a "behavior" or "preference" fact.'
    ),
}

_FINAL = "Update the memory from the conversation above. Answer with only the JSON object."


def _esc(text: str) -> str:
    return html.escape(text, quote=False)


def _shorten(text: str) -> str:
    if len(text) <= TRUNCATE_AT:
        return text
    return text[:_KEEP] + _CUT + text[-_KEEP:]


def _when(turn: Turn) -> str:
    """``[2026-03-05 14:30 UTC] `` when the turn's time is known (its ``occurred_at``)."""
    if turn.occurred_at is None:
        return ""
    at = turn.occurred_at
    at = at.astimezone(UTC) if at.tzinfo is not None else at.replace(tzinfo=UTC)
    return f"[{at:%Y-%m-%d %H:%M} UTC] "


def format_conversation(turns: Sequence[Turn]) -> str:
    """``User: ...`` / ``Assistant: ...`` blocks, each after the time it was said when
    known (``[2026-03-05 14:30 UTC] User: ...``), long turns cut in the middle, escaped."""
    lines = [
        f"{_when(turn)}{'User' if turn.role == 'user' else 'Assistant'}: {_shorten(turn.text)}"
        for turn in turns
    ]
    return _esc("\n\n".join(lines))


def _fact_line(fact: PromptFact) -> str:
    content = _esc(fact.content)
    if fact.manual:
        content = "[MANUAL] " + content
    line = f"- [{_esc(fact.alias)} | {_esc(fact.category)} | {confidence_text(fact.confidence)}]"
    line += f" {content}"
    if fact.category == "correction" and fact.source_error and fact.source_error.strip():
        line += f" (avoid: {_esc(fact.source_error)})"
    return line


def _memory_block(state: MemoryState) -> str:
    profile = [
        f"- {name}: {_esc(state.profile[name]) if state.profile.get(name) else '(empty)'}"
        for name in PROFILE_SECTIONS
    ]
    facts = [_fact_line(fact) for fact in state.facts] or ["(none)"]
    return "\n".join(["Profile:", *profile, "", "Facts:", *facts])


def build_messages(
    state: MemoryState,
    turns: Sequence[Turn],
    signals: frozenset[Signal],
    *,
    today: date,
) -> list[dict[str, str]]:
    """The chat messages of one extraction: instructions, then the current memory, the
    conversation, one hint per detected signal, and today's date."""
    parts = [
        "Current memory:",
        "<current_memory>",
        _memory_block(state),
        "</current_memory>",
        "",
        "New conversation:",
        "<conversation>",
        format_conversation(turns),
        "</conversation>",
        "",
    ]
    hints = [_HINTS[signal] for signal in Signal if signal in signals]
    if hints:
        parts += [*hints, ""]
    parts += [f"Today's date: {today.isoformat()}", "", _FINAL]
    return [
        {"role": "system", "content": _SYSTEM},
        {"role": "user", "content": "\n".join(parts)},
    ]


def repair_messages(previous: list[dict[str, str]], raw: str, error: str) -> list[dict[str, str]]:
    """``previous`` followed by the unusable answer and a request to answer again."""
    retry = (
        f"That answer could not be used: {error}. Answer again with only the JSON "
        "object described above, and no other text."
    )
    return [
        *(dict(message) for message in previous),
        {"role": "assistant", "content": raw[:RAW_ECHO_LIMIT]},
        {"role": "user", "content": retry},
    ]
