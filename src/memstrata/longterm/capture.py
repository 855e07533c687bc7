"""Which messages long-term memory learns from, and what the user's words signal.

Extraction costs an LLM call, so the conversation it reads is cut down first: tool
traffic, system prompts, hidden messages, file-upload blocks and small talk ("ok",
"谢谢") say nothing durable about the user and only invite the model to record noise.
The same module spots corrections ("that's wrong", "不对") and confirmations ("exactly
right", "就是这样") with fixed patterns, so the prompt can point the model at them.

Everything here is pure and cheap: :func:`capturable` runs on every appended message.
"""

from __future__ import annotations

import re
from collections.abc import Mapping, Sequence
from typing import Any

from memstrata.longterm.model import Signal, Turn
from memstrata.types import Message, Role, Status

__all__ = [
    "capturable",
    "detect_signals",
    "filter_turns",
    "is_trivial",
    "signals_in",
    "strip_uploads",
]

#: How many of the latest user turns are searched for signals (DeerFlow: the last 6).
SIGNAL_WINDOW = 6

# Both tags, either case; the trailing newlines go with the block so no blank gap remains.
_UPLOAD_BLOCK = re.compile(
    r"<(?P<tag>uploaded_files|current_uploads)>[\s\S]*?</(?P=tag)>\n*", re.IGNORECASE
)

# Stripped from the end before the trivial check, so "ok!" and "好的。" count too.
_TRAILING = " \t\n\r.。,，!！?？;；"

# Acknowledgements that carry no information. Case folding is harmless for the Chinese
# entries, so one case-insensitive alternation covers the whole list.
_TRIVIAL = re.compile(
    "|".join(
        (
            r"嗯+",
            r"ok(?:ay)?",
            r"好的呢?",
            r"好[的呀]?",
            r"谢谢",
            r"感谢",
            r"多谢",
            r"对",
            r"是的",
            r"收到",
            r"明白",
            r"了解",
            r"知道了",
            r"got it",
            r"thanks",
            r"thank you",
            r"cheers",
        )
    ),
    re.IGNORECASE,
)

_I = re.IGNORECASE
# A Chinese sentence ends at punctuation or at the end of the message.
_ZH_END = r"(?:[。！？!?.]|$)"

_CORRECTION: tuple[re.Pattern[str], ...] = (
    re.compile(r"\bthat(?:'s| is) (?:wrong|incorrect)\b", _I),
    re.compile(r"\byou misunderstood\b", _I),
    re.compile(r"\btry again\b", _I),
    re.compile(r"\bredo\b", _I),
    re.compile(r"不对"),
    re.compile(r"你理解错了"),
    re.compile(r"你理解有误"),
    re.compile(r"重试"),
    re.compile(r"重新来"),
    re.compile(r"换一种"),
    re.compile(r"改用"),
)

# Bare "你说的对" / "没错" / "对的" are left out on purpose: 对 also starts 对不起, 对方, 对啊.
_REINFORCEMENT: tuple[re.Pattern[str], ...] = (
    re.compile(r"\byes[,.]?\s+(?:exactly|perfect|that(?:'s| is) (?:right|correct|it))\b", _I),
    re.compile(r"\bperfect(?:[.!?]|$)", _I),
    re.compile(r"\bexactly\s+(?:right|correct)\b", _I),
    re.compile(
        r"\bthat(?:'s| is)\s+(?:exactly\s+)?(?:right|correct|what i (?:wanted|needed|meant))\b",
        _I,
    ),
    re.compile(r"\bkeep\s+(?:doing\s+)?that\b", _I),
    re.compile(r"\bjust\s+(?:like\s+)?(?:that|this)\b", _I),
    re.compile(r"\bthis is (?:great|helpful)\b(?:[.!?]|$)", _I),
    re.compile(r"\bthis is what i wanted\b(?:[.!?]|$)", _I),
    re.compile(r"对[，,]?\s*就是这样" + _ZH_END),
    re.compile(r"完全正确" + _ZH_END),
    re.compile(r"(?:对[，,]?\s*)?就是这个意思" + _ZH_END),
    re.compile(r"正是我想要的" + _ZH_END),
    re.compile(r"继续保持" + _ZH_END),
    re.compile(r"(?:以后|今后)(?:都|一直)?保持这样" + _ZH_END),
)


def _one(patterns: tuple[re.Pattern[str], ...]) -> re.Pattern[str]:
    # One alternation per signal: this runs on every captured user message at append, where
    # a single scan costs a fraction of many. Case folding leaves the Chinese ones as they are.
    return re.compile("|".join(f"(?:{p.pattern})" for p in patterns), _I)


# Every pattern above needs one of these (case-folded); most messages hold none, and a few
# substring tests cost far less than a regular-expression scan.
_NEEDLES = (
    "wrong", "incorrect", "misunderstood", "again", "redo", "yes", "perfect", "exactly",
    "right", "correct", "what i", "keep", "just", "this is", "对", "理解", "重试", "重新", "换一种",
    "改用", "完全正确", "就是", "正是", "继续保持", "保持这样",
)  # fmt: skip

_PATTERNS: tuple[tuple[Signal, re.Pattern[str]], ...] = (
    (Signal.CORRECTION, _one(_CORRECTION)),
    (Signal.REINFORCEMENT, _one(_REINFORCEMENT)),
)


def _hidden(metadata: Mapping[str, Any] | None) -> bool:
    return isinstance(metadata, Mapping) and bool(metadata.get("hide_from_ui"))


def capturable(message: Message) -> bool:
    """Whether ``message`` could feed long-term memory: a complete, visible user
    message, or a complete assistant answer (not a tool-calling step)."""
    if message.status is not Status.COMPLETE:
        return False
    if message.role is Role.USER:
        return not _hidden(message.metadata)
    return message.role is Role.ASSISTANT and not message.tool_calls


def strip_uploads(text: str) -> str:
    """``text`` without its ``<uploaded_files>`` / ``<current_uploads>`` blocks, stripped."""
    return _UPLOAD_BLOCK.sub("", text).strip()


def is_trivial(text: str) -> bool:
    """Whether ``text`` is a bare acknowledgement ("ok", "thanks!", "好的。")."""
    core = text.strip().rstrip(_TRAILING)
    return _TRIVIAL.fullmatch(core) is not None


def filter_turns(messages: Sequence[Message]) -> list[Turn]:
    """The turns of one branch (oldest first) that are worth extracting from.

    A user message that is empty once its upload blocks are removed, or that is only
    an acknowledgement, is dropped together with the assistant reply that answers it:
    that reply is about the upload or the small talk, not about the user.
    """
    turns: list[Turn] = []
    skip_reply = False
    for message in messages:
        if message.status is not Status.COMPLETE:
            continue
        if message.role is Role.USER:
            if _hidden(message.metadata):
                continue
            text = strip_uploads(message.content)
            if not text or is_trivial(text):
                skip_reply = True
                continue
            skip_reply = False
            turns.append(Turn(message.id, "user", text, message.occurred_at))
        elif message.role is Role.ASSISTANT and not message.tool_calls:
            if skip_reply:
                skip_reply = False
                continue
            text = message.content.strip()
            if text:
                turns.append(Turn(message.id, "assistant", text, message.occurred_at))
    return turns


def signals_in(text: str) -> frozenset[Signal]:
    """The signals one user message carries; correction and reinforcement are
    detected independently, so a message can carry both."""
    body = text.strip()
    folded = body.casefold()
    if not any(needle in folded for needle in _NEEDLES):
        return frozenset()
    return frozenset(signal for signal, pattern in _PATTERNS if pattern.search(body))


def detect_signals(turns: Sequence[Turn]) -> frozenset[Signal]:
    """The signals in the last :data:`SIGNAL_WINDOW` user turns (assistant replies between
    them do not push a user's correction out of the window)."""
    found: set[Signal] = set()
    users = [t for t in turns if t.role == "user"]
    for turn in users[-SIGNAL_WINDOW:]:
        found |= signals_in(turn.text)
    return frozenset(found)
